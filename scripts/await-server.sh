# Sourced by the conformance scripts: the one way they check their port and wait for their server.
#   require_free_port PORT             fails when something already answers on 127.0.0.1:PORT
#   await_server PID URL LOG NAME      waits up to 120 s for any HTTP answer from URL; fails at once,
#                                      printing LOG, when process PID exits or never answers
#   show_server_log LOG NAME           the last 100 lines of LOG on stderr

require_free_port() {
  if curl -s -m 2 -o /dev/null "http://127.0.0.1:$1/"; then
    echo "something already answers on 127.0.0.1:$1; set CONFORMANCE_PORT to a free port" >&2
    exit 1
  fi
}

show_server_log() {
  echo "--- $2 log (last 100 lines) ---" >&2
  tail -n 100 "$1" >&2
}

await_server() {
  local pid="$1" url="$2" log="$3" name="$4"
  for _ in $(seq 1 240); do
    # Any HTTP answer (400 without a session) means the server is up.
    if curl -s -m 5 -o /dev/null "$url"; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the $name exited before it answered on $url" >&2
      show_server_log "$log" "$name"
      exit 1
    fi
    sleep 0.5
  done
  echo "the $name did not answer on $url within 120 s" >&2
  show_server_log "$log" "$name"
  exit 1
}
