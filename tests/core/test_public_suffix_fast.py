"""`gitdns.core.checks.dnsnames._is_public` (the list built only for a name a rule could make
public) answers as the Public Suffix List package does."""

from __future__ import annotations

from gitdns.core.checks.dnsnames import _is_public, public_suffixes


def test_the_same_answer_as_the_package_for_every_rule_and_below() -> None:
    psl = public_suffixes()
    rules = sorted(psl._publicsuffix)  # the package's own rules, to ask about each
    names = {"example.com", "co.uk", "github.io", "foo.github.io", "kobe.jp", "city.kobe.jp", "a.city.kobe.jp",
             "www.ck", "example.xn--p1ai", "cluster.local", "tenant-a.io", "x.y.z.example.org"}
    for rule in rules:
        bare = rule.lstrip("!").removeprefix("*.")
        names.update((bare, f"x.{bare}", f"a.b.{bare}"))
    wrong = [n for n in sorted(names) if "." in n and _is_public(n.lower()) != psl.is_public(n.lower())]
    assert not wrong, wrong[:10]
