#!/usr/bin/env bash
# nginx (deploy/nginx/imageloader.conf) in front of `imageloader serve` instances, all on
# 127.0.0.1: the deployment the README describes, on one machine.
#
#   scripts/serve-cluster.sh start [DIR]   # start, print the address, return
#   scripts/serve-cluster.sh stop [DIR]    # stop everything started in DIR
#   scripts/serve-cluster.sh install       # only install nginx, wrk and curl when missing
#
# Environment: CLUSTER_PORT (nginx, default 8080), INSTANCE_PORTS (default "8081 8082"),
# IMAGELOADER (the binary; default: .build-release/release/imageloader, as scripts/demo.sh
# builds it), SERVE_ARGS (more arguments for
# every instance, e.g. "--allow-unsigned --local-root /srv/images"). Installs nginx,
# wrk and curl with apt-get when they are missing. DIR (default .build/cluster) holds the
# configuration, the caches, the pid files and the logs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command=${1:-start}
dir=$(mkdir -p "${2:-$root/.build/cluster}" && cd "${2:-$root/.build/cluster}" && pwd)
port=${CLUSTER_PORT:-8080}
instances=${INSTANCE_PORTS:-"8081 8082"}

install_missing() {
    local missing=()
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    command -v wrk >/dev/null 2>&1 || missing+=(wrk)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    if [ ${#missing[@]} -gt 0 ]; then
        local sudo=""
        if [ "$(id -u)" != 0 ]; then
            command -v sudo >/dev/null || { echo "serve-cluster: run as root, or install ${missing[*]}" >&2; exit 1; }
            sudo=sudo
        fi
        echo "serve-cluster: installing ${missing[*]}" >&2
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

wait_for() {  # URL, seconds
    for _ in $(seq 1 $(($2 * 10))); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no answer from $1" >&2
    return 1
}

stop() {
    for pidfile in "$dir"/instance-*.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
    if [ -f "$dir/nginx.pid" ]; then
        kill -QUIT "$(cat "$dir/nginx.pid")" 2>/dev/null || true
        for _ in $(seq 1 50); do [ -f "$dir/nginx.pid" ] || break; sleep 0.1; done
    fi
}

start() {
    # The servers started below must not inherit the caller's other descriptors (a
    # test's pipe, say): a reader would wait for them to close for as long as they run.
    for fd in $(ls /proc/$$/fd); do
        if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    install_missing
    local nginx_binary
    nginx_binary=$(command -v nginx || echo /usr/sbin/nginx)
    local binary=${IMAGELOADER:-}
    if [ -z "$binary" ]; then
        # The release binary scripts/demo.sh made (built now, the same way, when missing).
        binary=$root/.build-release/release/imageloader
        [ -x "$binary" ] || bash "$root/scripts/build-release.sh" >&2
    fi
    stop
    mkdir -p "$dir/logs" "$dir/tmp" "$dir/nginx-cache"
    # The deployment file, with this cluster's ports and cache folder.
    local servers=""
    for p in $instances; do servers+="    server 127.0.0.1:$p max_fails=1 fail_timeout=5s;\n"; done
    sed -e "/^    server 127.0.0.1:808[12] /d" \
        -e "s#^    keepalive 32;#$servers    keepalive 32;#" \
        -e "s#/var/cache/nginx/imageloader#$dir/nginx-cache#" \
        -e "s#listen 127.0.0.1:8080;#listen 127.0.0.1:$port;#" \
        "$root/deploy/nginx/imageloader.conf" > "$dir/imageloader.conf"
    cat > "$dir/nginx.conf" <<CONF
user $(id -un) $(id -gn);
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/logs/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log $dir/logs/nginx-access.log;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    include $dir/imageloader.conf;
}
CONF
    for p in $instances; do
        # shellcheck disable=SC2086
        "$binary" serve --host 127.0.0.1 --port "$p" --cache-dir "$dir/disk-$p" ${SERVE_ARGS:-} > "$dir/logs/instance-$p.log" 2>&1 &
        echo $! > "$dir/instance-$p.pid"
    done
    # Up to 90 s each: a debug build starts slowly beside a busy test suite.
    for p in $instances; do wait_for "http://127.0.0.1:$p/health" 90; done
    # nginx keeps its standard error open when it goes to the background: not our caller's pipe.
    "$nginx_binary" -c "$dir/nginx.conf" -p "$dir" 2>> "$dir/logs/nginx-error.log"
    wait_for "http://127.0.0.1:$port/health" 10
    echo "cluster on http://127.0.0.1:$port (instances: $instances; files in $dir)"
}

case "$command" in
    install) install_missing ;;
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 install|start|stop [DIR]" >&2; exit 2 ;;
esac
