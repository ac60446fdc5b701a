# Progress for the .ci scripts (sourced): every phase says what it does when it
# starts and how long it took when it ends, and no command runs for more than
# 8 s without a line on the terminal.
#
#   TBP_TAG=setup               the prefix of this script's lines: [setup] ...
#   tbp_phase LABEL WHAT        "[setup] LABEL: WHAT"
#   tbp_done [NOTE]             "[setup] LABEL: done in 12.3 s[, NOTE]"
#   CMD 2>&1 | tbp_watch WHAT   CMD's lines as they come; after 8 s without
#                               one, "[setup]   ... still WHAT: ..." (time so
#                               far, the last n/N counter seen, MB received)
#   tbp_quiet WHAT CMD...       CMD's output kept apart (shown if it fails),
#                               a line every 8 s while it runs
#
# Lines go to stderr; tbp_watch writes to stdout (redirect it as the command's
# output should go).  TBP_QUIET_S sets the 8 s.

TBP_TAG=${TBP_TAG:-ci}

# Microseconds since the epoch (bash 5's EPOCHREALTIME).
tbp_us() { printf "%s" "${EPOCHREALTIME//[.,]/}"; }

# "4.2 s", "1 min 05 s"
tbp_fmt_us() {
	local us=$1
	if [ "$us" -lt 60000000 ]; then
		printf '%d.%d s' $((us / 1000000)) $((us / 100000 % 10))
	else
		printf '%d min %02d s' $((us / 60000000)) $((us / 1000000 % 60))
	fi
}

# Bytes received on every interface but lo (a download's progress).
tbp_rx_bytes() {
	awk -F'[: ]+' 'NR > 2 && $2 != "lo" { s += $3 } END { printf "%d", s }' /proc/net/dev 2>/dev/null || echo 0
}

tbp_phase() {
	tbp_phase_label=$1
	tbp_phase_t0=$(tbp_us)
	printf '[%s] %s: %s\n' "$TBP_TAG" "$1" "$2" >&2
}

tbp_done() {
	printf '[%s] %s: done in %s%s\n' "$TBP_TAG" "$tbp_phase_label" \
		"$(tbp_fmt_us $(($(tbp_us) - tbp_phase_t0)))" "${1:+, $1}" >&2
}

# The heartbeat's text: time in this phase, the last counter, what came in.
tbp_still() { # what since_us counter rx0
	local msg rx
	msg="$(tbp_fmt_us $(($(tbp_us) - tbp_phase_t0))) into this phase"
	[ -n "$2" ] && msg="$msg, $(tbp_fmt_us $(($(tbp_us) - $2))) since the last line"
	[ -n "$3" ] && msg="$msg, last at $3"
	rx=$(($(tbp_rx_bytes) - $4))
	[ "$rx" -gt 1048576 ] && msg="$msg, $((rx / 1048576)) MB received"
	printf '[%s]   ... still %s: %s\n' "$TBP_TAG" "$1" "$msg" >&2
}

tbp_watch() { # what
	local what=$1 line pending="" counter="" rx0 last st said
	rx0=$(tbp_rx_bytes)
	last=$(tbp_us)
	said=$last
	while :; do
		if IFS= read -r -t "${TBP_QUIET_S:-8}" line; then
			line=$pending$line
			pending=""
			printf '%s\n' "$line"
			last=$(tbp_us)
			said=$last
			# ninja's [n/N], meson test's n/N
			if [[ $line =~ ^\[([0-9]+/[0-9]+)\] ]] || [[ $line =~ ^\ *([0-9]+/[0-9]+)\  ]]; then
				counter=${BASH_REMATCH[1]}
			fi
		else
			st=$?
			if [ "$st" -gt 128 ]; then
				pending=$pending$line   # a line not ended yet: printed when it is
				# (a read that returns early, as one interrupted does, says nothing)
				if [ $(($(tbp_us) - said)) -ge $((${TBP_QUIET_S:-8} * 1000000 - 500000)) ]; then
					tbp_still "$what" "$last" "$counter" "$rx0"
					said=$(tbp_us)
				fi
			else
				[ -n "$pending$line" ] && printf '%s\n' "$pending$line"
				return 0
			fi
		fi
	done
}

tbp_quiet() { # what cmd...
	local what=$1 log pid st last rx0
	shift
	log=$(mktemp)
	rx0=$(tbp_rx_bytes)
	"$@" >"$log" 2>&1 &
	pid=$!
	last=$(tbp_us)
	while kill -0 "$pid" 2>/dev/null; do
		sleep 0.5
		if [ $(($(tbp_us) - last)) -ge $((${TBP_QUIET_S:-8} * 1000000)) ]; then
			tbp_still "$what" "" "" "$rx0"
			last=$(tbp_us)
		fi
	done
	wait "$pid"
	st=$?
	if [ "$st" != 0 ]; then
		printf '[%s] %s failed (exit %s): %s\n' "$TBP_TAG" "$what" "$st" "$*" >&2
		tail -n 40 "$log" >&2
	fi
	rm -f "$log"
	return "$st"
}
