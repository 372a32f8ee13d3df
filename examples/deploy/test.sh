#!/usr/bin/env bash
# The deployment recipe, tested (docs/DEPLOY.md): `edge-llm serve` engines on loopback
# behind nginx running examples/deploy/nginx/edge-llm.conf (its ports and log path
# substituted), driven by `edge-llm bench agentic --endpoint` over 2 conversations.
#
#   1. one engine alone: its hot-cache ratio;
#   2. two engines behind nginx: each conversation stays on one engine, and the
#      hot-cache ratio is within 2 points of one engine's;
#   3. two engines behind nginx, the one serving the first conversation killed
#      (SIGKILL) mid-run: the turn in flight on it fails there and is counted, the
#      conversation moves to the other engine, pays one cold prefill there and is hot
#      again; the turns lost are printed.
#
# Needs nginx (Debian: apt-get install nginx), jq and curl. Run from anywhere:
#   examples/deploy/test.sh
# Environment: EDGE_LLM (the binary; default: built with cargo --release), DATASET
# (MLCommons agentic JSONL; default ../shared/data/agentic_coding_2.5h.jsonl beside
# the checkout), TURNS (client turns per conversation, default 6), NEW_TOKENS
# (max_completion_tokens, default 32), KEEP=1 (keep the scratch folder).
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD
RECIPE=$ROOT/examples/deploy/nginx/edge-llm.conf
DATASET=${DATASET:-$ROOT/../shared/data/agentic_coding_2.5h.jsonl}
TURNS=${TURNS:-6}
NEW_TOKENS=${NEW_TOKENS:-32}
STARTED=$SECONDS

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

for tool in nginx jq curl ps; do
    command -v "$tool" >/dev/null || fail "$tool is not installed (Debian: apt-get install -y nginx jq curl procps)"
done
[[ -f $DATASET ]] || fail "no dataset at $DATASET (set DATASET=path/to/agentic_coding_2.5h.jsonl)"
[[ -f $RECIPE ]] || fail "no nginx recipe at $RECIPE"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/edge-deploy.XXXXXXXX")
# Background processes this script started (engines, nginx, the bench), by wrapper id.
STARTED_PIDS=()

stop_all() {
    local pid
    for pid in "${STARTED_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${STARTED_PIDS[@]}"; do
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        { wait "$pid"; } 2>/dev/null || true
    done
    STARTED_PIDS=()
}

cleanup() {
    local rc=$?
    stop_all
    if [[ $rc -ne 0 ]]; then
        echo "--- logs in $TMP (tails) ---" >&2
        for f in "$TMP"/*.log "$TMP"/*.out; do
            [[ -f $f ]] && { echo "== $f" >&2; tail -n 15 "$f" >&2; }
        done
    fi
    if [[ ${KEEP:-0} == 1 || $rc -ne 0 ]]; then
        echo "scratch folder kept: $TMP" >&2
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ -z ${EDGE_LLM:-} ]]; then
    echo "building edge-llm (release)..."
    timeout 3600 cargo build --release -p edge-cli --bin edge-llm --quiet
    EDGE_LLM=$ROOT/target/release/edge-llm
fi
# A copy, so a rebuild of the shared target folder during the run changes nothing.
cp "$EDGE_LLM" "$TMP/edge-llm"
BIN=$TMP/edge-llm

# start_engine NAME: an engine on a free loopback port; sets PORT_<NAME>,
# WRAPPER_<NAME> (its `timeout` wrapper, which cleanup stops) and SERVE_<NAME> (the
# serve process itself, for the kill).
start_engine() {
    local name=$1 log=$TMP/$1.log port="" serve_pid=""
    : >"$log"
    timeout --kill-after=5 900 "$BIN" serve --host 127.0.0.1 --port 0 \
        --shutdown-timeout 5 >"$log" 2>&1 &
    local wrapper=$!
    STARTED_PIDS+=("$wrapper")
    for _ in $(seq 600); do
        port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log")
        [[ -n $port ]] && break
        kill -0 "$wrapper" 2>/dev/null || fail "engine $name exited: $(tail -n 5 "$log")"
        sleep 0.1
    done
    [[ -n $port ]] || fail "engine $name did not start listening within 60 s"
    serve_pid=$(ps -o pid= --ppid "$wrapper" | tr -d ' ')
    [[ -n $serve_pid ]] || fail "no serve process under $wrapper"
    timeout 10 curl -sf "http://127.0.0.1:$port/ready" >/dev/null || fail "engine $name is not ready"
    printf -v "PORT_$name" '%s' "$port"
    printf -v "WRAPPER_$name" '%s' "$wrapper"
    printf -v "SERVE_$name" '%s' "$serve_pid"
}

# free_port: a loopback port nothing listens on now (nginx's bind is the final check).
free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 40000))
        if ! timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    fail "no free port found"
}

# start_nginx PHASE PORT_A PORT_B: nginx on a free loopback port with the recipe, its
# two upstreams at PORT_A and PORT_B and its access log at $TMP/PHASE-access.log;
# sets NGINX_PORT.
start_nginx() {
    local phase=$1 a=$2 b=$3 dir=$TMP/nginx-$1
    mkdir -p "$dir/temp"
    NGINX_PORT=$(free_port)
    # Exactly the recipe, with the ports and the log path substituted.
    sed -e "s|server 127\.0\.0\.1:8001 |server 127.0.0.1:$a |" \
        -e "s|server 127\.0\.0\.1:8002 |server 127.0.0.1:$b |" \
        -e "s|listen 8080;|listen 127.0.0.1:$NGINX_PORT;|" \
        -e "s|/var/log/nginx/edge-llm\.access\.log|$TMP/$phase-access.log|" \
        "$RECIPE" >"$dir/edge-llm.conf"
    local want
    for want in "server 127.0.0.1:$a " "server 127.0.0.1:$b " "listen 127.0.0.1:$NGINX_PORT;" \
        "$TMP/$phase-access.log"; do
        grep -qF "$want" "$dir/edge-llm.conf" || fail "the recipe no longer has the line this test substitutes for: $want"
    done
    if grep -qE '127\.0\.0\.1:800[12] |listen 8080;' "$dir/edge-llm.conf"; then
        fail "the recipe has more upstreams or listeners than this test substitutes"
    fi
    local user=""
    [[ $(id -u) == 0 ]] && user="user root;"
    cat >"$dir/nginx.conf" <<EOF
# The wrapper: only what a system nginx.conf would give; the recipe is included as is.
$user
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $TMP/$phase-nginx-error.log info;
events { worker_connections 256; }
http {
    client_body_temp_path $dir/temp/body;
    proxy_temp_path $dir/temp/proxy;
    fastcgi_temp_path $dir/temp/fastcgi;
    uwsgi_temp_path $dir/temp/uwsgi;
    scgi_temp_path $dir/temp/scgi;
    access_log off;
    include $dir/edge-llm.conf;
}
EOF
    timeout 10 nginx -t -p "$dir" -c "$dir/nginx.conf" -e "$TMP/$phase-nginx-error.log" \
        >"$TMP/$phase-nginx-check.log" 2>&1 || fail "nginx -t: $(cat "$TMP/$phase-nginx-check.log")"
    timeout --kill-after=5 900 nginx -p "$dir" -c "$dir/nginx.conf" \
        -e "$TMP/$phase-nginx-error.log" >"$TMP/$phase-nginx.log" 2>&1 &
    STARTED_PIDS+=("$!")
    for _ in $(seq 100); do
        timeout 5 curl -sf "http://127.0.0.1:$NGINX_PORT/ready" >/dev/null && return
        sleep 0.1
    done
    fail "nginx did not answer on port $NGINX_PORT"
}

# bench_args PHASE URL: the agentic replay of 2 conversations against URL, its report
# at $TMP/PHASE.json (in BENCH_ARGS).
bench_args() {
    BENCH_ARGS=(bench agentic --endpoint "$2" --dataset "$DATASET" --conversations 2
        --max-turns "$TURNS" --max-new-tokens "$NEW_TOKENS" --report "$TMP/$1.json")
}

bench() {
    bench_args "$@"
    timeout 600 "$BIN" "${BENCH_ARGS[@]}" >"$TMP/$1.out" 2>&1 || fail "bench agentic ($1) failed"
}

ratio() { jq -r '.hot_cache_ratio' "$TMP/$1.json"; }

# metric URL NAME: a sample of an engine's /metrics.
metric() {
    timeout 10 curl -sf "$1/metrics" | sed -n "s/^$2 //p"
}

# upstreams LOG SESSION: the upstream address list of each answered request of SESSION,
# one per line, in order.
upstreams() {
    grep -F "session=\"$2\"" "$1" | grep -F '"POST /v1/chat/completions' |
        sed -n 's/.* upstream="\([^"]*\)".*/\1/p' || true
}

FIRST=$(head -n 1 "$DATASET" | jq -r '.conversation_id')
echo "dataset $DATASET: 2 conversations (the first: $FIRST), $TURNS turns each, $NEW_TOKENS new tokens a turn"

# 1. One engine alone.
start_engine solo
bench solo "http://127.0.0.1:$PORT_solo"
ONE=$(ratio solo)
stop_all
echo "one engine:               hot-cache ratio $ONE"

# 2. Two engines behind nginx.
start_engine a
start_engine b
start_nginx pair "$PORT_a" "$PORT_b"
bench pair "http://127.0.0.1:$NGINX_PORT"
TWO=$(ratio pair)
[[ $(jq '.turns_completed == .turns_expected' "$TMP/pair.json") == true ]] || fail "turns failed behind nginx: $(jq -c '.dropped' "$TMP/pair.json")"
placement=""
for conv in $(jq -r '[.turns[].conversation] | unique | .[]' "$TMP/pair.json"); do
    where=$(upstreams "$TMP/pair-access.log" "$conv" | sort -u)
    [[ $(wc -l <<<"$where") == 1 && -n $where ]] || fail "conversation $conv was served by: $where"
    placement+=" $conv→${where##*:}"
done
per_engine=""
for name in a b; do
    port_var=PORT_$name
    base="http://127.0.0.1:${!port_var}"
    per_engine+=" ${!port_var}: $(metric "$base" edge_hot_cache_ratio) ($(metric "$base" edge_engine_requests_total) requests, ready $(metric "$base" edge_ready))"
done
stop_all
DIFF=$(jq -n --argjson a "$ONE" --argjson b "$TWO" '(($a - $b) | fabs) * 100 | . * 100 | round / 100')
echo "two engines behind nginx: hot-cache ratio $TWO ($DIFF points from one engine); sessions on ports:$placement"
echo "  engines' /metrics edge_hot_cache_ratio:$per_engine"
jq -n --argjson a "$ONE" --argjson b "$TWO" -e '(($a - $b) | fabs) <= 0.02' >/dev/null ||
    fail "the hot-cache ratio behind nginx ($TWO) is not within 2 points of one engine's ($ONE)"

# 3. Two engines behind nginx; the first conversation's engine killed after its 2nd turn.
start_engine c
start_engine d
start_nginx kill "$PORT_c" "$PORT_d"
LOG=$TMP/kill-access.log
bench_args kill "http://127.0.0.1:$NGINX_PORT"
timeout 600 "$BIN" "${BENCH_ARGS[@]}" >"$TMP/kill.out" 2>&1 &
BENCH=$!
STARTED_PIDS+=("$BENCH")
seen=""
for _ in $(seq 3000); do
    mapfile -t seen < <(upstreams "$LOG" "$FIRST")
    [[ ${#seen[@]} -ge 2 ]] && break
    kill -0 "$BENCH" 2>/dev/null || fail "the bench ended before the kill"
    sleep 0.1
done
[[ ${#seen[@]} -ge 2 ]] || fail "the first conversation did not answer 2 turns within 300 s"
DEAD=${seen[0]##*:}
[[ ${seen[1]##*:} == "$DEAD" ]] || fail "the first conversation moved before the kill: ${seen[*]}"
case $DEAD in
"$PORT_c") VICTIM=$SERVE_c VICTIM_WRAPPER=$WRAPPER_c ALIVE=$PORT_d ;;
"$PORT_d") VICTIM=$SERVE_d VICTIM_WRAPPER=$WRAPPER_d ALIVE=$PORT_c ;;
*) fail "unknown upstream port $DEAD" ;;
esac
kill -KILL "$VICTIM"
# Reaped here, quietly (its wrapper ends with the same signal).
{ wait "$VICTIM_WRAPPER"; } 2>/dev/null || true
KILLED_AFTER=${#seen[@]}
echo "killed the engine on port $DEAD (serving $FIRST) after $KILLED_AFTER of its turns"
bench_rc=0
wait "$BENCH" || bench_rc=$?
[[ $bench_rc == 0 ]] || fail "bench agentic failed ($bench_rc): $(tail -n 5 "$TMP/kill.out")"

R=$TMP/kill.json
expected=$(jq '.turns_expected' "$R")
completed=$(jq '.turns_completed' "$R")
LOST=$((expected - completed))
failed_turns=$(jq '.dropped | length' "$R")
client_resends=$(jq '.reconnects' "$R")
# Requests of the first conversation after the kill: nginx's upstream list per request
# (two addresses: the attempt on the dead engine failed and nginx replayed it).
mapfile -t after < <(upstreams "$LOG" "$FIRST" | tail -n +$((KILLED_AFTER + 1)))
replayed=0
for u in "${after[@]}"; do
    [[ ${u##*:} == "$ALIVE" ]] || fail "a turn after the kill did not end on the surviving engine: $u"
    [[ $u == *", "* ]] && replayed=$((replayed + 1))
done
# How the attempts on the dead engine failed, from nginx's error log: in flight before
# the reply began (replayed by nginx), in flight mid-reply (the stream is cut: the
# client sees a broken stream), or refused (nginx tries it until max_fails).
errors=$TMP/kill-errors.log
grep -F '[error]' "$TMP/kill-nginx-error.log" | grep -F "upstream: \"http://127.0.0.1:$DEAD/" >"$errors" || true
before_reply=$(grep -cE '(prematurely closed connection|reset by peer\)) while reading response header' "$errors" || true)
mid_reply=$(grep -cE '(prematurely closed connection|reset by peer\)) while reading upstream,' "$errors" || true)
refused=$(grep -c 'connect() failed' "$errors" || true)
in_flight=$((before_reply + mid_reply))
echo "turns lost: $LOST of $expected"
echo "  turns in flight on the killed engine: $in_flight ($before_reply before the reply began, replayed by" \
    "nginx; $mid_reply cut off mid-reply); later attempts refused by it: $refused (replayed) until nginx" \
    "marked it down; requests replayed by nginx: $replayed; resent by the client: $client_resends;" \
    "turns failed for the client: $failed_turns"
# The moved conversation: its first turn on the surviving engine is a cold prefill,
# the later ones are hot again.
mapfile -t moved < <(jq -r --arg c "$FIRST" --argjson k "$KILLED_AFTER" \
    '.turns[] | select(.conversation == $c and .turn >= $k) | "\(.turn) \(.cached_tokens) \(.prompt_tokens)"' "$R")
[[ ${#moved[@]} -ge 2 ]] || fail "the moved conversation has ${#moved[@]} answered turns after the kill (need a cold one and a hot one)"
line="moved conversation on port $ALIVE:"
for i in "${!moved[@]}"; do
    read -r turn cached prompt <<<"${moved[$i]}"
    line+=" turn $turn cached $cached/$prompt;"
    if [[ $i == 0 ]]; then
        ((cached * 2 < prompt)) || fail "turn $turn after the move was not a cold prefill ($cached of $prompt cached)"
    else
        ((cached * 2 >= prompt)) || fail "turn $turn after the move is not hot ($cached of $prompt cached)"
    fi
done
echo "$line"
echo "  hot-cache ratio with the kill: $(ratio kill); surviving engine ready: $(metric "http://127.0.0.1:$ALIVE" edge_ready)"
((in_flight + refused >= 1)) || fail "no attempt failed on the killed engine"
# The conversation the kill did not touch answered every turn, as it did in phase 2.
other=$(jq --arg c "$FIRST" '[.turns[] | select(.conversation != $c)] | length' "$R")
other_before=$(jq --arg c "$FIRST" '[.turns[] | select(.conversation != $c)] | length' "$TMP/pair.json")
[[ $other == "$other_before" ]] || fail "the other conversation answered $other turns, $other_before without the kill"
stop_all
echo "PASS in $((SECONDS - STARTED)) s"
