#!/usr/bin/env bash
# A three-node MariaDB Galera cluster on this machine, behind HAProxy, for the scale test (npm run cluster:test).
#   scripts/cluster/cluster.sh install   the distribution's packages (galera-4, haproxy, rsync), when missing
#   scripts/cluster/cluster.sh up        three nodes (ports 3311-3313), HAProxy in front (MySQL on 3310), synced
#   scripts/cluster/cluster.sh down      everything stopped, the data removed
#   scripts/cluster/cluster.sh start N / kill N   one node started again (it rejoins), or killed with SIGKILL
# Everything lives under CLUSTER_DIR (/tmp/roster-cluster). Nodes run as the mysql user (the joiner's rsync SST
# writes into its data directory), with small buffer pools: the machine has two cores.
set -euo pipefail
DIR="${CLUSTER_DIR:-/tmp/roster-cluster}"
NODES=(1 2 3)
port() { echo $((3310 + $1)); }
gport() { echo $((14557 + 10 * $1)); }
istport() { echo $((14558 + 10 * $1)); }
sstport() { echo $((14434 + 10 * $1)); }
GCOMM="gcomm://127.0.0.1:$(gport 1),127.0.0.1:$(gport 2),127.0.0.1:$(gport 3)"

sql() { mariadb --protocol=tcp -h 127.0.0.1 -P "$(port "$1")" -u root -N -B -e "$2" 2>/dev/null; }
state() { sql "$1" "show status like 'wsrep_local_state_comment'" | awk '{print $2}'; }
size() { sql "$1" "show status like 'wsrep_cluster_size'" | awk '{print $2}'; }

wait_synced() { # node, seconds
  for _ in $(seq 1 "$2"); do
    [ "$(state "$1" || true)" = "Synced" ] && return 0
    sleep 1
  done
  echo "node $1 did not sync within $2 s (log: $DIR/node$1/error.log)" >&2
  tail -20 "$DIR/node$1/error.log" >&2 || true
  return 1
}

config() {
  local n=$1
  cat > "$DIR/node$n/my.cnf" <<CNF
[mysqld]
user=mysql
datadir=$DIR/node$n/data
socket=$DIR/node$n/mysqld.sock
pid-file=$DIR/node$n/mysqld.pid
log-error=$DIR/node$n/error.log
port=$(port "$n")
bind-address=127.0.0.1
skip-name-resolve
performance_schema=OFF
max_connections=300
innodb_buffer_pool_size=64M
innodb_log_file_size=32M
innodb_flush_log_at_trx_commit=2
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=/usr/lib/galera/libgalera_smm.so
wsrep_cluster_name=roster
wsrep_cluster_address=$GCOMM
wsrep_node_name=node$n
wsrep_node_address=127.0.0.1
# A node that stops answering is suspected after 2 s and evicted after 3 s (5 s and 15 s by default): commits wait
# for the eviction, so these bound how long a killed node stalls the others. Right on one machine or one LAN.
wsrep_provider_options="base_port=$(gport "$n");ist.recv_addr=127.0.0.1:$(istport "$n");gcache.size=64M;evs.keepalive_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;evs.inactive_check_period=PT0.5S"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$(sstport "$n")
# Reads wait for the writes the node has received: a client that wrote through one node reads it through another.
wsrep_sync_wait=1
CNF
}

start_node() { # node [extra args]
  local n=$1; shift
  setsid mariadbd --defaults-file="$DIR/node$n/my.cnf" "$@" < /dev/null > /dev/null 2>&1 &
}

haproxy_config() {
  cat > "$DIR/haproxy.cfg" <<CFG
global
  maxconn 2000
defaults
  mode tcp
  timeout connect 2s
  timeout client 60s
  timeout server 60s
  retries 3
  option redispatch
frontend mysql
  bind 127.0.0.1:3310
  default_backend galera
backend galera
  balance roundrobin
  option mysql-check user haproxy_check
  default-server inter 500ms fall 2 rise 3 on-marked-down shutdown-sessions
  server node1 127.0.0.1:$(port 1) check
  server node2 127.0.0.1:$(port 2) check
  server node3 127.0.0.1:$(port 3) check
frontend roster
  mode http
  bind 127.0.0.1:3100
  default_backend roster
backend roster
  mode http
  balance roundrobin
  option httpchk GET /health/ready
  # Requests in flight on an instance marked down finish: readiness follows the database, and a database blip
  # that marks every instance down must not also cut what they are answering.
  default-server inter 500ms fall 2 rise 2
  server a 127.0.0.1:3101 check
  server b 127.0.0.1:3102 check
CFG
}

case "${1:-}" in
  install)
    if [ ! -f /usr/lib/galera/libgalera_smm.so ] || ! command -v haproxy >/dev/null || ! command -v rsync >/dev/null; then
      export DEBIAN_FRONTEND=noninteractive
      apt-get install -y galera-4 haproxy rsync >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y galera-4 haproxy rsync >/dev/null; }
    fi
    ;;
  up)
    "$0" down >/dev/null 2>&1 || true
    mkdir -p "$DIR"
    for n in "${NODES[@]}"; do
      mkdir -p "$DIR/node$n/data"
      config "$n"
    done
    mariadb-install-db --defaults-file="$DIR/node1/my.cnf" --auth-root-authentication-method=normal --skip-test-db >/dev/null 2>&1
    chown -R mysql:mysql "$DIR"
    start_node 1 --wsrep-new-cluster
    wait_synced 1 60
    sql 1 "create user if not exists 'root'@'127.0.0.1'; grant all on *.* to 'root'@'127.0.0.1' with grant option;
      create user if not exists 'haproxy_check'@'127.0.0.1'" || true
    for n in 2 3; do start_node "$n"; wait_synced "$n" 120; done
    haproxy_config
    haproxy -f "$DIR/haproxy.cfg" -D -p "$DIR/haproxy.pid"
    echo "cluster up: $(size 1) nodes synced; MySQL through HAProxy at 127.0.0.1:3310, Roster front at 127.0.0.1:3100"
    ;;
  kill)
    kill -9 "$(cat "$DIR/node$2/mysqld.pid")"
    ;;
  start)
    start_node "$2"
    wait_synced "$2" 120
    ;;
  wait)
    wait_synced "$2" "${3:-120}"
    ;;
  down)
    [ -f "$DIR/haproxy.pid" ] && kill "$(cat "$DIR/haproxy.pid")" 2>/dev/null || true
    for n in "${NODES[@]}"; do
      [ -f "$DIR/node$n/mysqld.pid" ] && kill -9 "$(cat "$DIR/node$n/mysqld.pid")" 2>/dev/null || true
    done
    sleep 1
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: $0 install|up|down|kill N|start N|wait N [seconds]" >&2
    exit 2
    ;;
esac
