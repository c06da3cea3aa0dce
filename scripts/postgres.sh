#!/usr/bin/env bash
# postgres.sh — a throwaway PostgreSQL 15 + pgvector server for aid's tests.
#
#   scripts/postgres.sh install   as root on Debian 12: install PostgreSQL 15, its server headers
#                                 and pgvector (built from Debian's trixie source package);
#                                 idempotent, and a no-op when everything is already there
#   scripts/postgres.sh start     start a fresh cluster in a temp dir on 127.0.0.1, create the
#                                 database aid_test with the vector extension, print its DSN
#   scripts/postgres.sh stop      stop that cluster and delete its temp dir (safe when none runs)
#   scripts/postgres.sh env       install (when root) + start, print `export AID_TEST_DATABASE_URL=...`
#
# Typical use:   eval "$(scripts/postgres.sh env)"  ...  scripts/postgres.sh stop
#
# Environment:
#   AID_PG_STATE   file where `start` records the cluster for `stop`
#                  (default /tmp/aid-postgres.state); give each concurrent cluster its own
#   AID_PG_PORT    first port tried by `start` (default 54329; the next free one is taken)
#   AID_PG_BIN     PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
#
# Only stdout carries results (the DSN, the export line); progress goes to stderr.
# The cluster trusts every local connection and runs with fsync off: it is for tests only.
set -euo pipefail

PG_MAJOR=15
PG_BIN=${AID_PG_BIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
STATE=${AID_PG_STATE:-/tmp/aid-postgres.state}
FIRST_PORT=${AID_PG_PORT:-54329}
DB_NAME=aid_test
DB_USER=postgres
# The deb-src entry for pgvector lives in its own file so it is easy to see and to remove.
TRIXIE_SRC_LIST=/etc/apt/sources.list.d/aid-pgvector-trixie-src.list

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# ---------------------------------------------------------------------------------------------
# install

# is_installed PKG: whether dpkg has PKG fully installed.
is_installed() {
	[[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

# debian_mirror prints the URI of this machine's own Debian archive (the one serving bookworm),
# so that the trixie deb-src entry uses the same mirror and no host name is written in this repo.
debian_mirror() {
	local f uri
	f=/etc/apt/sources.list.d/debian.sources
	if [[ -r "$f" ]]; then
		# deb822: stanzas separated by blank lines; take the URIs of the one whose Suites
		# contain exactly "bookworm" (not bookworm-security or bookworm-updates).
		uri=$(awk '
			BEGIN { RS = ""; FS = "\n" }
			{
				uris = ""; ok = 0
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uris = u[1] }
					if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); n = split($i, s, /[ \t]+/)
						for (j = 1; j <= n; j++) if (s[j] == "bookworm") ok = 1 }
				}
				if (ok && uris != "") { print uris; exit }
			}' "$f")
		if [[ -n "$uri" ]]; then
			printf '%s\n' "$uri"
			return 0
		fi
	fi
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r "$f" ]] || continue
		# one-line format: deb [options] URI SUITE COMPONENT...
		uri=$(awk '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == "bookworm") { print $i; exit }
			}' "$f")
		if [[ -n "$uri" ]]; then
			printf '%s\n' "$uri"
			return 0
		fi
	done
	return 1
}

# signed_by prints the keyring apt uses for Debian, so the trixie entry is verified the same way.
signed_by() {
	local k
	for k in /usr/share/keyrings/debian-archive-keyring.gpg /usr/share/keyrings/debian-archive-trixie-automatic.gpg; do
		if [[ -r "$k" ]]; then
			printf '%s\n' "$k"
			return 0
		fi
	done
	return 1
}

vector_control() {
	local sharedir
	sharedir=$("$PG_BIN/pg_config" --sharedir 2>/dev/null) || return 1
	printf '%s/extension/vector.control\n' "$sharedir"
}

apt_updated=0
apt_update() {
	((apt_updated)) && return 0
	log "apt-get update"
	# A broken unrelated source must not stop us; a missing package fails loudly below.
	if ! apt-get update -qq >&2; then
		log "warning: apt-get update reported errors; continuing"
	fi
	apt_updated=1
}

cmd_install() {
	[[ $EUID -eq 0 ]] || die "install must run as root (it uses apt-get and make install)"
	command -v apt-get >/dev/null || die "install needs a Debian system (apt-get not found)"

	local pkgs=() p
	# postgresql-server-dev-15 gives pg_config and the PGXS headers pgvector builds against;
	# dpkg-dev provides dpkg-source, which `apt-get source` uses to unpack the source package.
	for p in postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR dpkg-dev make gcc libc6-dev; do
		is_installed "$p" || pkgs+=("$p")
	done
	local need_vector=1 control
	if control=$(vector_control) && [[ -f "$control" ]]; then
		need_vector=0
	fi
	if ((${#pkgs[@]} == 0 && need_vector == 0)); then
		log "PostgreSQL $PG_MAJOR and pgvector already installed"
		return 0
	fi

	export DEBIAN_FRONTEND=noninteractive
	if ((${#pkgs[@]} > 0)); then
		apt_update
		log "apt-get install ${pkgs[*]}"
		apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
	fi
	control=$(vector_control) || die "pg_config not found at $PG_BIN after installing"
	[[ -f "$control" ]] || build_pgvector
	[[ -f "$control" ]] || die "pgvector build finished but $control is missing"
	log "PostgreSQL $PG_MAJOR and pgvector installed"
}

# build_pgvector builds Debian's own pgvector source package from trixie (bookworm does not
# package it) against PostgreSQL 15. The entry is deb-src only, so no binary package can ever
# come from trixie.
build_pgvector() {
	local mirror keyring
	mirror=$(debian_mirror) || die "cannot find this machine's Debian (bookworm) source in /etc/apt"
	keyring=$(signed_by) || die "no Debian archive keyring under /usr/share/keyrings"
	local want="deb-src [signed-by=$keyring] $mirror trixie main"
	if [[ ! -f "$TRIXIE_SRC_LIST" ]] || [[ "$(cat "$TRIXIE_SRC_LIST")" != "$want" ]]; then
		log "adding $TRIXIE_SRC_LIST (deb-src trixie main, same mirror as bookworm)"
		printf '%s\n' "$want" >"$TRIXIE_SRC_LIST"
		apt_updated=0
	fi
	# Refresh only that one entry: the binary lists were refreshed above if they were needed.
	if ((!apt_updated)) || ! apt-cache showsrc pgvector 2>/dev/null | grep -q '^Package: pgvector'; then
		log "apt-get update (trixie deb-src only)"
		apt-get update -qq -o Dir::Etc::SourceList="$TRIXIE_SRC_LIST" \
			-o Dir::Etc::SourceParts=- -o APT::Get::List-Cleanup=0 >&2
	fi

	local work
	work=$(mktemp -d /tmp/aid-pgvector-build.XXXXXX)
	BUILD_DIR=$work
	trap 'rm -rf "$BUILD_DIR"' EXIT
	# apt's sandbox user downloads into it; otherwise apt falls back to root and warns.
	if id _apt >/dev/null 2>&1; then chown _apt "$work"; fi
	log "apt-get source pgvector/trixie"
	(cd "$work" && apt-get source -qq pgvector/trixie >&2)
	local src
	src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'pgvector-*' | head -n1)
	[[ -n "$src" ]] || die "apt-get source pgvector did not unpack a pgvector-* directory"
	log "building $(basename "$src") against PostgreSQL $PG_MAJOR"
	# with_llvm=no: skip the LLVM bitcode used only by JIT, which the tests turn off anyway.
	make -s -C "$src" PG_CONFIG="$PG_BIN/pg_config" with_llvm=no -j"$(nproc)" >&2
	make -s -C "$src" PG_CONFIG="$PG_BIN/pg_config" with_llvm=no install >&2
	rm -rf "$work"
}

# ---------------------------------------------------------------------------------------------
# start / stop

# as_owner CMD...: run CMD as the user that owns the cluster: postgres when we are root (the
# server refuses to run as root), otherwise ourselves.
as_owner() {
	if [[ $EUID -eq 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

port_in_use() {
	# A successful connect means something listens there.
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# running DIR: whether the cluster in DIR has a live postmaster.
running() {
	[[ -f "$1/data/postmaster.pid" ]] && as_owner "$PG_BIN/pg_ctl" status -D "$1/data" >/dev/null 2>&1
}

cmd_start() {
	[[ -x "$PG_BIN/initdb" ]] || die "PostgreSQL $PG_MAJOR not found in $PG_BIN; run: sudo $0 install"
	if [[ $EUID -eq 0 ]]; then
		id postgres >/dev/null 2>&1 || die "user postgres does not exist; run: $0 install"
	fi
	if [[ -s "$STATE" ]]; then
		local AID_PG_DIR=""
		# shellcheck disable=SC1090
		source "$STATE"
		if [[ -n "$AID_PG_DIR" ]] && running "$AID_PG_DIR"; then
			die "a cluster recorded in $STATE is still running in $AID_PG_DIR; run '$0 stop' first or set AID_PG_STATE"
		fi
		log "removing stale state $STATE"
		cmd_stop
	fi

	local dir
	dir=$(mktemp -d /tmp/aid-pg.XXXXXX)
	chmod 700 "$dir"
	[[ $EUID -eq 0 ]] && chown postgres:postgres "$dir"
	# Record the dir at once, so `stop` cleans up even if the start fails half way.
	printf 'AID_PG_DIR=%q\n' "$dir" >"$STATE"

	as_owner "$PG_BIN/initdb" -D "$dir/data" -U "$DB_USER" --auth=trust -E UTF8 --locale=C \
		--no-sync --no-instructions >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		die "initdb failed"
	}
	# Speed over durability, loopback only, sockets in the temp dir, room for concurrency tests.
	cat >>"$dir/data/postgresql.conf" <<EOF

# --- aid test settings (scripts/postgres.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
checkpoint_timeout = 30min
max_wal_size = 4GB
jit = off
shared_buffers = 128MB
log_min_messages = warning
EOF

	local port=$FIRST_PORT last=$((FIRST_PORT + 200)) started=0
	while ((port <= last)); do
		if port_in_use "$port"; then
			port=$((port + 1))
			continue
		fi
		if as_owner "$PG_BIN/pg_ctl" start -D "$dir/data" -w -t 60 -l "$dir/postgres.log" \
			-o "-p $port" >/dev/null 2>&1; then
			started=1
			break
		fi
		# Lost a race for the port: try the next one; any other failure is fatal.
		if grep -qE 'could not (bind|create listen socket)|Address already in use' "$dir/postgres.log" 2>/dev/null; then
			port=$((port + 1))
			continue
		fi
		cat "$dir/postgres.log" >&2 || true
		die "pg_ctl start failed"
	done
	((started)) || die "no free port in $FIRST_PORT..$last"
	printf 'AID_PG_DIR=%q\nAID_PG_PORT=%q\n' "$dir" "$port" >"$STATE"

	local psql=("$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U "$DB_USER")
	as_owner "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME" >&2
	as_owner "${psql[@]}" -d "$DB_NAME" -c "CREATE EXTENSION vector" >&2 ||
		die "CREATE EXTENSION vector failed: is pgvector installed? run: sudo $0 install"

	local dsn="postgres://$DB_USER@127.0.0.1:$port/$DB_NAME?sslmode=disable"
	printf 'AID_PG_DSN=%q\n' "$dsn" >>"$STATE"
	log "started PostgreSQL $PG_MAJOR in $dir on 127.0.0.1:$port (state: $STATE)"
	printf '%s\n' "$dsn"
}

cmd_stop() {
	if [[ ! -s "$STATE" ]]; then
		rm -f "$STATE"
		log "nothing to stop (no state in $STATE)"
		return 0
	fi
	local AID_PG_DIR=""
	# shellcheck disable=SC1090
	source "$STATE"
	if [[ -n "$AID_PG_DIR" && -d "$AID_PG_DIR" ]]; then
		if running "$AID_PG_DIR"; then
			as_owner "$PG_BIN/pg_ctl" stop -D "$AID_PG_DIR/data" -m fast -w -t 60 >/dev/null 2>&1 ||
				as_owner "$PG_BIN/pg_ctl" stop -D "$AID_PG_DIR/data" -m immediate -w -t 30 >/dev/null 2>&1 ||
				log "warning: could not stop the cluster in $AID_PG_DIR"
		fi
		# Only ever delete a directory this script created.
		case "$AID_PG_DIR" in
		/tmp/aid-pg.*) rm -rf "$AID_PG_DIR" ;;
		*) log "warning: not deleting unexpected directory $AID_PG_DIR" ;;
		esac
		log "stopped and removed $AID_PG_DIR"
	fi
	rm -f "$STATE"
}

cmd_env() {
	if [[ $EUID -eq 0 ]]; then
		cmd_install
	fi
	local dsn
	dsn=$(cmd_start)
	printf "export AID_TEST_DATABASE_URL='%s'\n" "$dsn"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
}

case "${1:-}" in
install) cmd_install ;;
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
-h | --help | help)
	usage
	;;
*)
	usage
	exit 2
	;;
esac
