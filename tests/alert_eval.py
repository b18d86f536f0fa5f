"""A small evaluator of the shipped PrometheusRules' alerts over scraped ``/metrics`` pages.

The rules use a few PromQL forms; this evaluates exactly those, as Prometheus does, and refuses
any other (a new form in a rule fails its test until it is taught here):

    selector           name, name{label="v", label!="v", label=~"re", label!~"re"}
    range functions    increase(selector[10m])     (counter resets handled; no extrapolation:
                                                    the sign of the result is Prometheus's)
    aggregation        sum|max|min by (labels) (expr)
    comparison         expr > N, >=, <, <=, ==, !=  (a filter, as without ``bool``)
    arithmetic         time() - expr
    set operator       expr or expr

A timeline is a list of scrapes ``(seconds, exposition text)``; every page gets the target
labels a PodMonitor adds (``namespace``, ``pod``, ``instance``, ``job``).  An instant selector at
time t reads the last scrape at or before t (a series a scrape no longer exposes is stale at
once, as Prometheus marks it); a range ``[w]`` reads the scrapes in (t - w, t].  `firing`
evaluates a rule at every scrape, holds it for its ``for`` and returns the alerts firing at the
end, each as its labels (the rule's labels and ``alertname`` added).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Labels = frozenset[tuple[str, str]]
Vector = dict[Labels, float]
TARGET = {"namespace": "gitdns-system", "pod": "gitdns-0", "instance": "10.0.0.7:9090", "job": "gitdns"}

_TOKEN = re.compile(r"""\s*(?:(?P<num>\d+(?:\.\d+)?)(?![A-Za-z_\d])|(?P<dur>\[\d+[smhd]\])|(?P<str>"(?:[^"\\]|\\.)*")
                        |(?P<op>=~|!~|!=|==|>=|<=|[-(){},=<>])|(?P<name>[A-Za-z_:][A-Za-z0-9_:]*))""", re.X)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_AGGREGATIONS = {"sum": sum, "max": max, "min": min}
_COMPARE = {">": float.__gt__, ">=": float.__ge__, "<": float.__lt__, "<=": float.__le__, "==": float.__eq__,
            "!=": float.__ne__}


def duration(text: str) -> float:
    match = re.fullmatch(r"(\d+)([smhd])", text)
    if match is None:
        raise ValueError(f"not a duration: {text!r}")
    return int(match[1]) * _UNITS[match[2]]


@dataclass
class Timeline:
    """Scrapes as ``(time, {series labels incl. __name__: value})``."""

    scrapes: list[tuple[float, Vector]]

    @classmethod
    def of(cls, pages: Sequence[tuple[float, str]], target: Mapping[str, str] = TARGET) -> Timeline:
        scrapes = []
        for when, text in pages:
            vector: Vector = {}
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    labels = {**sample.labels, **target, "__name__": sample.name}
                    vector[frozenset(labels.items())] = float(sample.value)
            scrapes.append((when, vector))
        return cls(scrapes)

    def at(self, t: float) -> Vector:
        before = [vector for when, vector in self.scrapes if when <= t]
        return before[-1] if before else {}

    def window(self, t: float, width: float) -> list[Vector]:
        return [vector for when, vector in self.scrapes if t - width < when <= t]


class Expr:
    """A parsed expression: ``evaluate(timeline, t)`` is its instant vector (or a scalar)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._lex(text)
        self.pos = 0
        self.tree = self._or()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.pos]!r} in {text!r}")

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        tokens, pos = [], 0
        while pos < len(text.rstrip()):
            match = _TOKEN.match(text, pos)
            if match is None or match.end() == pos:
                raise ValueError(f"cannot read {text[pos:pos + 20]!r} in {text!r}")
            kind = match.lastgroup
            assert kind is not None
            tokens.append((kind, match[kind]))
            pos = match.end()
        return tokens

    def _peek(self, value: str | None = None) -> str | None:
        if self.pos >= len(self.tokens):
            return None
        _kind, text = self.tokens[self.pos]
        return text if value is None or text == value else None

    def _take(self, value: str | None = None) -> tuple[str, str]:
        if self.pos >= len(self.tokens) or (value is not None and self.tokens[self.pos][1] != value):
            raise ValueError(f"expected {value!r} at token {self.pos} of {self.text!r}")
        self.pos += 1
        return self.tokens[self.pos - 1]

    # grammar: or := cmp ('or' cmp)* ; cmp := sub (CMP number)? ; sub := atom ('-' atom)?
    def _or(self) -> Any:
        node = self._cmp()
        while self._peek("or"):
            self._take("or")
            node = ("or", node, self._cmp())
        return node

    def _cmp(self) -> Any:
        node = self._sub()
        op = self._peek()
        if op in _COMPARE:
            self._take()
            kind, number = self._take()
            if kind != "num":
                raise ValueError(f"a comparison with {number!r} (only numbers) in {self.text!r}")
            node = ("cmp", op, node, float(number))
        return node

    def _sub(self) -> Any:
        node = self._atom()
        if self._peek("-"):
            self._take("-")
            node = ("sub", node, self._atom())
        return node

    def _atom(self) -> Any:
        kind, text = self._take()
        if text == "(":
            node = self._or()
            self._take(")")
            return node
        if kind == "num":
            return ("num", float(text))
        if kind != "name":
            raise ValueError(f"unexpected {text!r} in {self.text!r}")
        if text in _AGGREGATIONS and self._peek("by"):
            self._take("by")
            self._take("(")
            by = []
            while not self._peek(")"):
                by.append(self._take()[1])
                if self._peek(","):
                    self._take(",")
            self._take(")")
            self._take("(")
            inner = self._or()
            self._take(")")
            return ("agg", text, tuple(by), inner)
        if text == "time" and self._peek("("):
            self._take("(")
            self._take(")")
            return ("time",)
        if text == "increase" and self._peek("("):
            self._take("(")
            selector = self._selector(self._take()[1])
            kind, width = self._take()
            if kind != "dur":
                raise ValueError(f"increase() needs a range in {self.text!r}")
            self._take(")")
            return ("increase", selector, duration(width[1:-1]))
        if self._peek("(") is not None:
            raise ValueError(f"function {text}() is not known here: teach tests/alert_eval.py")
        return self._selector(text)

    def _selector(self, name: str) -> Any:
        matchers = [("__name__", "=", name)]
        if self._peek("{"):
            self._take("{")
            while not self._peek("}"):
                label = self._take()[1]
                op = self._take()[1]
                kind, value = self._take()
                if kind != "str" or op not in ("=", "!=", "=~", "!~"):
                    raise ValueError(f"bad matcher {label}{op}{value} in {self.text!r}")
                matchers.append((label, op, value[1:-1].encode().decode("unicode_escape")))
                if self._peek(","):
                    self._take(",")
            self._take("}")
        return ("sel", tuple(matchers))

    # --- evaluation ------------------------------------------------------------------------------

    def evaluate(self, timeline: Timeline, t: float) -> Vector:
        value = _eval(self.tree, timeline, t)
        if not isinstance(value, dict):
            raise ValueError(f"{self.text!r} is a scalar, not a vector")
        return value


def _match(labels: Labels, matchers: Sequence[tuple[str, str, str]]) -> bool:
    have = dict(labels)
    for label, op, value in matchers:
        got = have.get(label, "")
        ok = {"=": got == value, "!=": got != value, "=~": re.fullmatch(value, got) is not None,
              "!~": re.fullmatch(value, got) is None}[op]
        if not ok:
            return False
    return True


def _drop_name(labels: Labels) -> Labels:
    return frozenset((k, v) for k, v in labels if k != "__name__")


def _eval(node: Any, tl: Timeline, t: float) -> Vector | float:
    kind = node[0]
    if kind == "num":
        return float(node[1])
    if kind == "time":
        return float(t)
    if kind == "sel":
        return {labels: v for labels, v in tl.at(t).items() if _match(labels, node[1])}
    if kind == "increase":
        series: dict[Labels, list[float]] = {}
        for vector in tl.window(t, node[2]):
            for labels, v in vector.items():
                if _match(labels, node[1][1]):
                    series.setdefault(_drop_name(labels), []).append(v)
        out: Vector = {}
        for labels, values in series.items():
            if len(values) < 2:
                continue  # one sample: no increase (a series born at 1 shows none)
            total = 0.0
            for before, after in pairwise(values):
                total += after - before if after >= before else after  # a reset starts from 0
            out[labels] = total
        return out
    if kind == "agg":
        _, name, by, inner = node
        vector = _eval(inner, tl, t)
        assert isinstance(vector, dict)
        groups: dict[Labels, list[float]] = {}
        for labels, v in vector.items():
            key = frozenset((k, val) for k, val in labels if k in by)
            groups.setdefault(key, []).append(v)
        return {key: float(_AGGREGATIONS[name](values)) for key, values in groups.items()}
    if kind == "cmp":
        _, op, inner, number = node
        value = _eval(inner, tl, t)
        if not isinstance(value, dict):
            raise ValueError("a scalar comparison is not an alert")
        return {labels: v for labels, v in value.items() if _COMPARE[op](v, number)}
    if kind == "sub":
        left, right = _eval(node[1], tl, t), _eval(node[2], tl, t)
        if isinstance(left, float) and isinstance(right, dict):
            return {_drop_name(labels): left - v for labels, v in right.items()}
        if isinstance(left, dict) and isinstance(right, float):
            return {_drop_name(labels): v - right for labels, v in left.items()}
        raise ValueError("vector - vector is not used by the rules")
    if kind == "or":
        left, right = _eval(node[1], tl, t), _eval(node[2], tl, t)
        assert isinstance(left, dict) and isinstance(right, dict)
        out = dict(left)
        seen = {_drop_name(labels) for labels in left}
        out.update({labels: v for labels, v in right.items() if _drop_name(labels) not in seen})
        return out
    raise AssertionError(kind)


def rules(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every alerting rule of a PrometheusRule document."""
    return [rule for group in document["spec"]["groups"] for rule in group["rules"] if "alert" in rule]


def firing(rule: Mapping[str, Any], timeline: Timeline) -> list[dict[str, str]]:
    """The alerts of ``rule`` firing at the last scrape: evaluated at every scrape, each label set
    held for the rule's ``for`` (from the first evaluation it was true at, as Prometheus does)."""
    expr = Expr(str(rule["expr"]))
    hold = duration(str(rule["for"])) if "for" in rule else 0.0
    active: dict[Labels, float] = {}
    last: set[Labels] = set()
    for when, _ in timeline.scrapes:
        result = {_drop_name(labels) for labels in expr.evaluate(timeline, when)}
        active = {labels: active.get(labels, when) for labels in result}
        last = {labels for labels, since in active.items() if when - since >= hold}
    extra = {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}
    return sorted(({**dict(labels), **extra, "alertname": str(rule["alert"])} for labels in last),
                  key=lambda alert: sorted(alert.items()))
