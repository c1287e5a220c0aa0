# shellcheck shell=bash
# jaeger: the OTLP receiver the tracing tests read back through its query
# API. Built from the Jaeger module that internal/testbed/tools/jaeger's own
# go.mod pins as a tool (a module of its own, so that its dependencies
# never move this module's), cached in $BIN under a stamp of that go.mod
# and go.sum; spans kept in memory; every listener on loopback.

JAEGER_EXE=$BIN/jaeger
JAEGER_MOD=$ROOT/internal/testbed/tools/jaeger
OTLP_PORT=4318
JAEGER_QUERY_PORT=16686

jaeger_up() {
	local conf=$TB/jaeger.yaml pid restart="" stamp want
	OTLP_ENDPOINT=http://127.0.0.1:$OTLP_PORT
	JAEGER_URL=http://127.0.0.1:$JAEGER_QUERY_PORT
	stamp=$(sha_of "$JAEGER_MOD/go.mod" "$JAEGER_MOD/go.sum")
	# Static, as the bridge: no cgo, so the build shares none of its
	# packages with a cgo build.
	go_tool jaeger github.com/jaegertracing/jaeger/cmd/jaeger "$stamp" "$JAEGER_MOD" CGO_ENABLED=0

	want=$(
		cat <<-YAML
			# written by scripts/testbed
			service:
			  extensions: [jaeger_storage, jaeger_query]
			  pipelines:
			    traces:
			      receivers: [otlp]
			      processors: [batch]
			      exporters: [jaeger_storage_exporter]
			  telemetry:
			    metrics:
			      level: none
			    logs:
			      level: warn
			extensions:
			  jaeger_storage:
			    backends:
			      mem:
			        memory:
			          max_traces: 20000
			  jaeger_query:
			    storage:
			      traces: mem
			    http:
			      endpoint: 127.0.0.1:$JAEGER_QUERY_PORT
			    grpc:
			      endpoint: 127.0.0.1:16685
			receivers:
			  otlp:
			    protocols:
			      http:
			        endpoint: 127.0.0.1:$OTLP_PORT
			processors:
			  batch:
			    timeout: 100ms
			exporters:
			  jaeger_storage_exporter:
			    trace_storage: mem
		YAML
	)
	if [[ ! -f $conf || $(<"$conf") != "$want" ]]; then
		printf '%s\n' "$want" >"$conf"
		restart="config changed"
	fi

	if pid=$(pid_of jaeger "$JAEGER_EXE"); then
		if [[ $(readlink "/proc/$pid/exe") == *" (deleted)" ]]; then
			restart="binary rebuilt"
		fi
		if [[ -z $restart ]] && jaeger_answers; then
			report jaeger reused "$OTLP_ENDPOINT (query $JAEGER_URL)"
			return 0
		fi
		stop_daemon jaeger "$JAEGER_EXE" >/dev/null
		restart="replaced pid $pid: ${restart:-not answering}"
	else
		restart=""
	fi
	start_daemon jaeger "$JAEGER_EXE" --config "$conf"
	pid=$(<"$RUN/jaeger.pid")
	local i
	for ((i = 0; i < 120; i++)); do
		jaeger_answers && break
		alive_or_die jaeger "$pid"
		sleep 0.5
	done
	if ! jaeger_answers; then
		logtail "$LOGS/jaeger.log"
		die "jaeger did not answer on $OTLP_ENDPOINT and $JAEGER_URL within 60 s (log: $LOGS/jaeger.log)"
	fi
	report jaeger started "$OTLP_ENDPOINT (query $JAEGER_URL, pid $pid${restart:+, $restart})"
}

# jaeger_answers: both the OTLP/HTTP receiver and the query API answer.
jaeger_answers() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		-d '{}' "$OTLP_ENDPOINT/v1/traces" 2>/dev/null) == 200 ]] &&
		curl -fs -o /dev/null "$JAEGER_URL/api/services" 2>/dev/null
}

jaeger_down() {
	stop_daemon jaeger "$JAEGER_EXE"
}
