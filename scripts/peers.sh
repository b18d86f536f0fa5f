#!/usr/bin/env bash
# Start/stop real DNS test peers on 127.0.0.1 high ports.
#   bash scripts/peers.sh start|stop [bind dnsmasq pdns]      (default: all three)
#
#   bind     BIND 9 authoritative, zone example.test, RFC2136 + TSIG   udp/tcp 127.0.0.1:$BIND_PORT (15353)
#   pdns     PowerDNS auth + sqlite3 + HTTP API, zone example.test     udp/tcp 127.0.0.1:$PDNS_PORT (15354),
#            with RFC 2136 + AXFR for TSIG key ddns-key (pdnsutil)
#                                                                      http 127.0.0.1:$PDNS_API_PORT (18081)
#   dnsmasq  hosts-file server (addn-hosts, SIGHUP reload)             udp/tcp 127.0.0.1:$DNSMASQ_PORT (15355)
#
# Data and configs live under $PEERS (default: ./.peers); each start wipes that peer's
# directory, so every run begins from the same zone contents.  PIDs: $PEERS/<peer>/pid.
set -euo pipefail
PEERS=${PEERS:-$PWD/.peers}
BIND_PORT=${BIND_PORT:-15353}
PDNS_PORT=${PDNS_PORT:-15354}
PDNS_API_PORT=${PDNS_API_PORT:-18081}
DNSMASQ_PORT=${DNSMASQ_PORT:-15355}
TSIG_SECRET=c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seS0xMjM0NTY=   # base64("secret-key-for-tests-only-123456")
PDNS_API_KEY=test-api-key
export PATH="$PATH:/usr/sbin:/sbin"

wait_for() {  # wait_for <seconds> <command...>: poll until the command succeeds
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timeout waiting for: $*" >&2; return 1; }
    sleep 0.05
  done
}
need() {  # need <tool...> <install hint>: fail with the hint when a tool is missing
  local hint=${*: -1} t
  for t in "${@:1:$#-1}"; do
    command -v "$t" >/dev/null 2>&1 || { echo "$t not found: $hint" >&2; return 1; }
  done
}
dns_up() { dig +time=1 +tries=1 @127.0.0.1 -p "$1" "$2" SOA | grep -q 'status: NOERROR'; }

start_bind() {
  local d=$PEERS/bind; rm -rf "$d"; mkdir -p "$d"
  cat > "$d/named.conf" <<EOF
key "ddns-key" { algorithm hmac-sha256; secret "$TSIG_SECRET"; };
options {
    directory "$d";
    pid-file "$d/named.pid";
    session-keyfile "$d/session.key";
    managed-keys-directory "$d";
    listen-on port $BIND_PORT { 127.0.0.1; };
    listen-on-v6 { none; };
    recursion no;
    dnssec-validation no;
    allow-query { 127.0.0.0/8; };
    notify no;
};
controls { };
zone "example.test" {
    type primary;
    file "$d/example.test.zone";
    allow-update { key "ddns-key"; };
    allow-transfer { key "ddns-key"; 127.0.0.1; };
};
EOF
  cat > "$d/example.test.zone" <<'EOF'
$TTL 300
@   IN SOA ns1.example.test. hostmaster.example.test. ( 1 3600 600 86400 300 )
    IN NS  ns1.example.test.
ns1 IN A   127.0.0.1
EOF
  named-checkconf "$d/named.conf"
  named -g -c "$d/named.conf" > "$d/named.log" 2>&1 &
  echo $! > "$d/pid"
  wait_for 10 dns_up "$BIND_PORT" example.test
}

start_pdns() {
  need pdns_server pdnsutil "apt-get install -y --no-install-recommends pdns-server pdns-backend-sqlite3"
  local d=$PEERS/pdns; rm -rf "$d"; mkdir -p "$d"
  cat > "$d/pdns.conf" <<EOF
launch=gsqlite3
gsqlite3-database=$d/pdns.sqlite3
local-address=127.0.0.1
local-port=$PDNS_PORT
socket-dir=$d
daemon=no
guardian=no
disable-syslog=yes
loglevel=4
security-poll-suffix=
api=yes
api-key=$PDNS_API_KEY
webserver=yes
webserver-address=127.0.0.1
webserver-port=$PDNS_API_PORT
webserver-allow-from=127.0.0.0/8
default-soa-content=ns1.@ hostmaster.@ 0 10800 3600 604800 300
dnsupdate=yes
allow-dnsupdate-from=127.0.0.0/8
EOF
  python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(open(sys.argv[2]).read()); c.commit()" \
    "$d/pdns.sqlite3" /usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql
  # zone example.test with the TSIG key allowed to update and transfer it (RFC 2136 + AXFR), before the start
  local u=(pdnsutil --config-dir="$d")
  "${u[@]}" create-zone example.test ns1.example.test >/dev/null
  "${u[@]}" add-record example.test ns1 A 300 127.0.0.1 >/dev/null
  "${u[@]}" import-tsig-key ddns-key hmac-sha256 "$TSIG_SECRET" >/dev/null
  "${u[@]}" set-meta example.test TSIG-ALLOW-DNSUPDATE ddns-key >/dev/null
  "${u[@]}" set-meta example.test SOA-EDIT-DNSUPDATE INCREASE >/dev/null
  "${u[@]}" set-meta example.test TSIG-ALLOW-AXFR ddns-key >/dev/null
  pdns_server --config-dir="$d" > "$d/pdns.log" 2>&1 &
  echo $! > "$d/pid"
  wait_for 10 curl -sf -H "X-API-Key: $PDNS_API_KEY" "http://127.0.0.1:$PDNS_API_PORT/api/v1/servers/localhost"
}

start_dnsmasq() {
  local d=$PEERS/dnsmasq; rm -rf "$d"; mkdir -p "$d"
  cat > "$d/dnsmasq.conf" <<EOF
port=$DNSMASQ_PORT
listen-address=127.0.0.1
bind-interfaces
no-resolv
no-hosts
no-negcache
local=/example.test/
addn-hosts=$d/hosts
pid-file=$d/dnsmasq.pid
log-facility=-
log-queries
EOF
  printf '192.0.2.10 web.example.test\n192.0.2.11 web.example.test\n192.0.2.12 web.example.test\n' > "$d/hosts"
  chmod 0755 "$PEERS" "$d"; chmod 0644 "$d/hosts"   # dnsmasq drops to nobody: it must re-read the file on SIGHUP
  dnsmasq -k -C "$d/dnsmasq.conf" > "$d/dnsmasq.log" 2>&1 &
  echo $! > "$d/pid"
  wait_for 10 sh -c "dig +short +time=1 +tries=1 @127.0.0.1 -p $DNSMASQ_PORT web.example.test A | grep -q ."
}

alive() {  # a zombie (exited, not yet reaped by PID 1) counts as dead
  local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $s != Z* ]]
}

stop_one() {  # SIGTERM by recorded PID, wait up to 10 s, then SIGKILL
  local f=$PEERS/$1/pid pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill "$pid" 2>/dev/null; then
    for _ in $(seq 1 200); do alive "$pid" || break; sleep 0.05; done
    if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$f"
}

cmd=${1:-}; shift || true
names=${*:-bind dnsmasq pdns}
for n in $names; do
  case $n in bind|dnsmasq|pdns) ;; *) echo "unknown peer: $n (known: bind dnsmasq pdns)" >&2; exit 2 ;; esac
done
case $cmd in
  start)
    mkdir -p "$PEERS"
    for n in $names; do
      t0=$(date +%s.%N); "start_$n"
      awk -v n="$n" -v a="$t0" -v b="$(date +%s.%N)" -v p="$(cat "$PEERS/$n/pid")" \
        'BEGIN{printf "%-8s ready in %.2fs (pid %s)\n", n, b-a, p}'
    done ;;
  stop) for n in $names; do stop_one "$n"; done ;;
  *) echo "usage: $0 start|stop [bind dnsmasq pdns]" >&2; exit 2 ;;
esac
