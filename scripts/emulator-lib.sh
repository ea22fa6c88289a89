# Shared by scripts/dynamodb-local.sh and scripts/local-kms.sh (sourced, not run): finding a free
# loopback port and telling whether the instance a state directory records is still up. The
# sourcing script defines log, die and STATE_DIR first.

# answers reports whether something speaks HTTP on the port: any status will do (DynamoDB
# Local answers a bare GET with 400, local-kms with 405).
answers() {
	local code
	code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/" 2>/dev/null)" || true
	[[ "$code" != "" && "$code" != "000" ]]
}

# port_in_use reports whether anything accepts connections on the loopback port.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
	local p i
	for i in $(seq 1 50); do
		p=$(( 20000 + RANDOM % 40000 ))
		port_in_use "$p" || { echo "$p"; return 0; }
	done
	die "no free loopback port found"
}

# running reports whether the instance recorded in STATE_DIR is alive and answering.
running() {
	[[ -f "$STATE_DIR/pid" && -f "$STATE_DIR/port" ]] || return 1
	local pid port
	pid="$(cat "$STATE_DIR/pid")" port="$(cat "$STATE_DIR/port")"
	kill -0 "$pid" 2>/dev/null && answers "$port"
}
