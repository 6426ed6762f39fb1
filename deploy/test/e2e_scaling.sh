#!/usr/bin/env bash
# End-to-end check of the scaling examples of docs/scaling.md with two real
# Prometheus servers scraping one exporter: by default Debian's 2.42 as
# shard 0 and replica "a", and Prometheus 3.16 as shard 1 and replica "b",
# so a mixed fleet is checked to hash alike.
#
# Sharding (deploy/prometheus/prometheus-shard.yml): one sample service
# process (bench/cmd/fakeapi) answers on 12 ports, 12 services; the
# exporter's module default lists 8 of them and module staging 6 (two in
# both), so /sd hands over 14 targets. Each server runs the file as shipped
# turned into its shard by the sed command its header documents (checked to
# be the one in the file and in docs/scaling.md), with this exporter's
# address and every interval at 1s. Then every /sd target must be scraped,
# up, through /probe with its module, and have series on exactly one shard:
# the one that hashmod gives its URL (MD5, computed here apart from
# Prometheus, so the check also fails when the hash is taken of the wrong
# label); a service's series (all its modules', the recording rules') on
# one shard; both shards holding some; and every shard scraping the
# exporter's own job, so that DeploymentServiceExporterAbsent stays quiet.
#
# HA pair (deploy/prometheus/prometheus-ha.yml): a new exporter with two
# modules on two sample service processes of 4 services each: default with
# min_interval 800ms (25s at 30s, scaled to the 1s interval) and control
# with 0s. Both servers scrape all 8 targets, replica "a" with the file as
# shipped and "b" with the documented sed of it. Over a 10s window each
# replica must have scraped every target about 10 times, and the polls of
# each target, as deployment_service_polls_total counted them in the
# answers either replica stored, must be at most one per scrape interval
# for module default (the pair's two scrapes cost one poll), and more than
# that for module control (the same check fails without a min-interval:
# the replicas mostly scrape at different moments, and each such scrape
# polls). The
# polls_total counts are also checked against the requests the sample
# services received (one GET of the API root per poll).
#
# promtool check config checks both files as shipped (each loading every
# rule file) and every configuration the servers run. Everything started
# is stopped on exit. About 35 seconds.
#
# Environment:
#   EXPORTER_BIN=path      use that exporter binary instead of building one
#   E2E_SCALING_PROMETHEUS="2.42 3.16"  the versions of the two servers
#                          ("2.42 2.42" needs no Prometheus 3 build)
#   PROMETHEUS3_BIN=path   that Prometheus 3.16 (see lib.sh)
# To see it fail, as it should:
#   E2E_SCALING_MODULUS=3  a modulus other than the number of servers
#   E2E_SCALING_SHARDS="0 0"  the servers' shard numbers (default "0 1")
#   E2E_SCALING_MIN_INTERVAL=0s  no min-interval for the HA pair
set -euo pipefail
# shellcheck source=deploy/test/lib.sh source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_apt curl curl
ensure_apt jq jq
ensure_apt promtool prometheus
prometheus2=/usr/bin/prometheus
[[ -x "${prometheus2}" ]] || die "Debian's prometheus package left no ${prometheus2}"

read -r -a versions <<<"${E2E_SCALING_PROMETHEUS:-2.42 3.16}"
read -r -a shard_numbers <<<"${E2E_SCALING_SHARDS:-0 1}"
modulus=${E2E_SCALING_MODULUS:-2}
min_interval=${E2E_SCALING_MIN_INTERVAL:-800ms}
[[ ${#versions[@]} -eq 2 ]] || die "E2E_SCALING_PROMETHEUS names ${#versions[@]} versions, want 2"
[[ ${#shard_numbers[@]} -eq 2 ]] || die "E2E_SCALING_SHARDS names ${#shard_numbers[@]} shards, want 2"
window=10 # seconds of HA scrapes measured

shard_file=${repo}/deploy/prometheus/prometheus-shard.yml
ha_file=${repo}/deploy/prometheus/prometheus-ha.yml

start_work

# stop PID...: ends those processes (started here) and forgets them.
stop() {
  local pid p keep
  for pid in "$@"; do kill "${pid}" 2>/dev/null || true; done
  for pid in "$@"; do wait "${pid}" 2>/dev/null || true; done
  keep=()
  for p in "${pids[@]}"; do [[ " $* " == *" ${p} "* ]] || keep+=("${p}"); done
  pids=("${keep[@]}")
}

t_start=${SECONDS}
exporter=$(exporter_binary "${work}")
(cd "${repo}" && go build -o "${work}/fakeapi" ./bench/cmd/fakeapi)
declare -A prometheus_bin
for v in "${versions[@]}"; do
  case ${v} in
    2.42) prometheus_bin[${v}]=${prometheus2} ;;
    3.16) prometheus_bin[${v}]=$(prometheus3_binary "${work}") ;;
    *) die "E2E_SCALING_PROMETHEUS: no Prometheus ${v} here (2.42 or 3.16)" ;;
  esac
done

# --- The files as shipped ---------------------------------------------------

# The commands that turn the shipped files into a server's: the ones their
# headers and docs/scaling.md show (with k, N written out as ${k}, ${N}).
# shellcheck disable=SC2016,SC1003 # the commands' text, not to run here
shard_sed_doc='sed -E -e "s/^( *modulus:) [0-9]+/\1 ${N}/" \'
# shellcheck disable=SC2016,SC1003
shard_sed_doc2='-e "s/^( *(shard|regex):) \"[0-9]+\"/\1 \"${k}\"/" \'
ha_sed_doc='sed '\''s/^\( *replica:\) "a"/\1 "b"/'\'' prometheus-ha.yml >prometheus.yml'
for f in "${shard_file}" "${repo}/docs/scaling.md"; do
  grep -qF -- "${shard_sed_doc}" "${f}" && grep -qF -- "${shard_sed_doc2}" "${f}" ||
    die "${f#"${repo}"/} does not show the command this check uses to make shard k of N: ${shard_sed_doc} ${shard_sed_doc2}"
done
for f in "${ha_file}" "${repo}/docs/scaling.md"; do
  grep -qF -- "${ha_sed_doc}" "${f}" ||
    die "${f#"${repo}"/} does not show the command this check uses to make replica b: ${ha_sed_doc}"
done
# shard_config K N: the shipped file as shard K of N, by that command.
shard_config() {
  local k=$1 N=$2
  sed -E -e "s/^( *modulus:) [0-9]+/\1 ${N}/" \
    -e "s/^( *(shard|regex):) \"[0-9]+\"/\1 \"${k}\"/" \
    "${shard_file}"
}
# ha_config REPLICA: the shipped file ("a") or replica b, by that command.
ha_config() {
  if [[ $1 == a ]]; then cat "${ha_file}"; else sed 's/^\( *replica:\) "a"/\1 "b"/' "${ha_file}"; fi
}

rule_files=("${repo}"/deploy/prometheus/rules/*.yml)
for f in "${shard_file}" "${ha_file}"; do
  out=$(cd "$(dirname "${f}")" && promtool check config "$(basename "${f}")" 2>&1) ||
    die "promtool check config $(basename "${f}"): ${out}"
  found=$(grep -c '^Checking .*rules/' <<<"${out}" || true)
  [[ "${found}" -eq "${#rule_files[@]}" ]] ||
    die "$(basename "${f}") loads ${found} rule files, deploy/prometheus/rules has ${#rule_files[@]}"
done
# The marked numbers are where the command finds them, once each.
c=$(shard_config 3 5)
[[ $(grep -cE '^ *modulus: 5( |$)' <<<"${c}") -eq 1 && $(grep -cE '^ *shard: "3"( |$)' <<<"${c}") -eq 1 &&
  $(grep -cE '^ *regex: "3"( |$)' <<<"${c}") -eq 1 ]] ||
  die "the sed command did not set one modulus, one shard label and one keep regex in prometheus-shard.yml: $(grep -E 'modulus:|shard:|regex:' <<<"${c}")"
[[ $(ha_config b | grep -cE '^ *replica: "b"') -eq 1 ]] || die "the sed command did not make prometheus-ha.yml replica b"
log "ok: promtool check config passes prometheus-shard.yml and prometheus-ha.yml, each loading all ${#rule_files[@]} rule files; the documented commands set shard, modulus and replica"

# --- Helpers ----------------------------------------------------------------

key=e2e-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "${key}" >"${work}/key"
chmod 600 "${work}/key"

# start_fakeapi_on NAME N: a sample service answering on N ports (N services).
start_fakeapi_on() {
  start_fakeapi "$1" -key "${key}" -page-size 50 -latency 2ms -listeners "$2"
  [[ $(jq '.urls | length' "${work}/$1.json" 2>/dev/null) == "$2" ]] || die "sample service $1 did not start"
}
urls_of() { jq -r '.urls[]' "${work}/$1.json"; }
roots_of() { curl -fsS "$(jq -r .control "${work}/$1.json")/stats" | jq -r .by_endpoint.root; }
reset_stats() { curl -fsS -X POST "$(jq -r .control "${work}/$1.json")/reset"; }

# module_yaml NAME EXTRA URL...: a module of the exporter's configuration
# file listing those services, with the key and the lines EXTRA.
module_yaml() {
  local name=$1 extra=$2 u
  shift 2
  printf '  %s:\n    targets:\n' "${name}"
  for u in "$@"; do printf '      - %s\n' "${u}"; done
  cat <<YAML
    http_client_config:
      authorization:
        type: Token
        credentials_file: ${work}/key
    timeout: 5s
    locations:
      detail_limit: 2
${extra}
YAML
}

# started NAME PID URL: waits until the process PID (started here) answers
# URL; says 1 when it ended because its port was taken meanwhile (another
# process here picked the same free port), so the caller tries another.
started() {
  local name=$1 pid=$2 url=$3 i
  for ((i = 0; i < 240; i++)); do
    curl -fsS -o /dev/null --max-time 2 "${url}" 2>/dev/null && return 0
    if ! kill -0 "${pid}" 2>/dev/null; then
      stop "${pid}"
      grep -q 'address already in use' "${work}/${name}.log" && return 1
      die "${name} ended: $(tail -n 5 "${work}/${name}.log")"
    fi
    sleep 0.25
  done
  die "${name} did not answer ${url} within 60s"
}

# start_exporter NAME MODULES FLAG...: starts the exporter with that
# configuration file and flags on a free port: exporter_addr and
# exporter_pid.
start_exporter() {
  local name=$1 modules=$2
  shift 2
  "${exporter}" --config.check --config.file="${modules}" >/dev/null || die "--config.check refuses ${modules}"
  while :; do
    exporter_addr="127.0.0.1:$(free_port)"
    "${exporter}" --config.file="${modules}" --web.listen-address="${exporter_addr}" "$@" \
      >"${work}/${name}.log" 2>&1 &
    exporter_pid=$!
    pids+=($!)
    started "${name}" "${exporter_pid}" "http://${exporter_addr}/-/ready" && break
  done
}

# for_test: a shipped configuration (stdin) as this check runs it: this
# exporter's address, every interval 1s, the rule files by absolute path,
# and an Alertmanager address where nothing listens.
for_test() {
  local out
  out=$(sed -E -e "s#localhost:10044#${exporter_addr}#g" \
    -e "s#localhost:9093#127.0.0.1:$(free_port)#" \
    -e "s#^( *- )rules/\*\.yml#\1${repo}/deploy/prometheus/rules/*.yml#" \
    -e 's/^( *(scrape_interval|scrape_timeout|evaluation_interval|refresh_interval):).*/\1 1s/')
  [[ $(grep -cF "${exporter_addr}" <<<"${out}") -eq 3 ]] && ! grep -q 'localhost:' <<<"${out}" &&
    grep -qF -- "- ${repo}/deploy/prometheus/rules/*.yml" <<<"${out}" &&
    [[ $(grep -cE '^ *(scrape_interval|scrape_timeout|evaluation_interval|refresh_interval): 1s$' <<<"${out}") -eq 6 ]] ||
    die "a shipped configuration is not of the shape this check adapts (the exporter's address thrice, rules/*.yml, six intervals): ${out}"
  printf '%s\n' "${out}"
}

# start_prometheus NAME VERSION CONFIG: checks CONFIG with promtool and
# runs that Prometheus with it on a free port until it is ready:
# prom_url[NAME], prom_pid[NAME].
declare -A prom_url prom_pid
start_prometheus() {
  local name=$1 version=$2 config=$3 bin port out flags
  bin=${prometheus_bin[${version}]}
  out=$(promtool check config "${config}" 2>&1) || die "promtool check config of ${name}'s configuration: ${out}"
  while :; do
    port=$(free_port)
    flags=(--config.file="${config}" --storage.tsdb.path="${work}/${name}-data"
      --web.listen-address="127.0.0.1:${port}")
    # Debian's 2.42 looks for console templates in /etc by default.
    [[ "${bin}" == "${prometheus2}" ]] && flags+=(--web.console.templates="${work}" --web.console.libraries="${work}")
    "${bin}" "${flags[@]}" >"${work}/${name}.log" 2>&1 &
    prom_pid[${name}]=$!
    pids+=($!)
    prom_url[${name}]="http://127.0.0.1:${port}"
    started "${name}" "${prom_pid[${name}]}" "${prom_url[${name}]}/-/ready" && break
  done
}

# query NAME EXPR [TIME]: the result vector of an instant query, as JSON.
query() {
  local args=(--data-urlencode "query=$2")
  [[ -n "${3:-}" ]] && args+=(--data-urlencode "time=$3")
  curl -fsS --get "${args[@]}" "${prom_url[$1]}/api/v1/query" | jq -c .data.result
}

# wait_query NAME EXPR SECONDS: waits until EXPR has a result on NAME.
wait_query() {
  local i
  for ((i = 0; i < $3 * 4; i++)); do
    [[ $(query "$1" "$2" 2>/dev/null | jq length 2>/dev/null) -gt 0 ]] 2>/dev/null && return 0
    sleep 0.25
  done
  die "$1 (${prom_url[$1]}) has no result for ${2} after $3s"
}

# hashmod VALUE MODULUS: what Prometheus' hashmod relabelling gives VALUE:
# the last 8 bytes of its MD5 sum as a big-endian number, modulo MODULUS.
hashmod() {
  local hex r=0 i
  hex=$(printf '%s' "$1" | md5sum | cut -c17-32)
  for ((i = 0; i < 16; i++)); do r=$(((r * 16 + 16#${hex:i:1}) % $2)); done
  echo "${r}"
}

failed=0
fail() { log "FAIL: $*"; failed=1; }

# --- Sharding ---------------------------------------------------------------

start_fakeapi_on shard 12
mapfile -t services < <(urls_of shard)
{
  echo modules:
  module_yaml default "" "${services[@]:0:8}"
  module_yaml staging "" "${services[@]:6:6}"
} >"${work}/shard-modules.yml"
start_exporter shard-exporter "${work}/shard-modules.yml"
curl -fsS "http://${exporter_addr}/sd" >"${work}/sd.json"
# The /sd targets, "module url", and where hashmod puts each.
mapfile -t sd_pairs < <(jq -r '.[] | .labels.module as $m | .targets[] | "\($m) \(.)"' "${work}/sd.json" | sort)
[[ ${#sd_pairs[@]} -eq 14 ]] || die "/sd hands over ${#sd_pairs[@]} targets, want 14: $(cat "${work}/sd.json")"
declare -A want_on
for s in 0 1; do want_on[${s}]=""; done
for pair in "${sd_pairs[@]}"; do
  h=$(hashmod "${pair#* }" "${modulus}")
  for s in 0 1; do
    [[ ${h} == "${shard_numbers[s]}" ]] && want_on[${s}]+="${pair}"$'\n'
  done
done

log "sharding: /sd hands over ${#sd_pairs[@]} targets (12 services, 2 modules); servers: shard ${shard_numbers[0]} of ${modulus} on Prometheus ${versions[0]}, shard ${shard_numbers[1]} of ${modulus} on ${versions[1]}"
for s in 0 1; do
  shard_config "${shard_numbers[s]}" "${modulus}" | for_test >"${work}/shard${s}.yml"
  start_prometheus "shard${s}" "${versions[s]}" "${work}/shard${s}.yml"
done
# Five seconds of scrapes after the first: /sd read (1s refresh) and every
# kept target scraped a few times.
for s in 0 1; do
  wait_query "shard${s}" 'count_over_time(up{job="deployment_service"}[1m]) >= 6' 60
done

declare -A got_on services_on
for s in 0 1; do
  name=shard${s}
  # Targets: each kept one up and scraped through /probe with its module.
  curl -fsS "${prom_url[${name}]}/api/v1/targets?state=active" >"${work}/${name}-targets.json"
  bad=$(jq -r --arg e "${exporter_addr}" '.data.activeTargets[] | select(.labels.job == "deployment_service_probe") |
    .labels.module as $m | (.labels.instance | @uri) as $t |
    select(.health != "up" or (.scrapeUrl | startswith("http://\($e)/probe?") | not) or
      (.scrapeUrl | test("[?&]module=\($m)(&|$)") | not) or (.scrapeUrl | contains("target=\($t)") | not)) |
    "\(.scrapeUrl) \(.health) \(.lastError)"' "${work}/${name}-targets.json")
  [[ -z "${bad}" ]] || fail "${name} scrapes targets wrongly: ${bad}"
  active=$(jq -r '.data.activeTargets[] | select(.labels.job == "deployment_service_probe") | "\(.labels.module) \(.labels.instance)"' \
    "${work}/${name}-targets.json" | sort)
  # Series: every scraped series of the job, by target; and the services
  # of every series of the job, the recording rules' included.
  got_on[${s}]=$(query "${name}" 'count by (module, instance) ({job="deployment_service_probe", module!=""})' |
    jq -r '.[] | "\(.metric.module) \(.metric.instance)"' | sort)
  [[ "${active}" == "${got_on[${s}]}" ]] ||
    fail "${name} has series of other targets than it scrapes: targets ${active//$'\n'/; }; series ${got_on[${s}]//$'\n'/; }"
  services_on[${s}]=$(query "${name}" 'count by (instance) ({job="deployment_service_probe"})' | jq -r '.[].metric.instance' | sort)
  [[ "${services_on[${s}]}" == "$(sed -n 's/^[^ ]* //p' <<<"${got_on[${s}]}" | sort -u)" ]] ||
    fail "${name} has series of other services than it scrapes: ${services_on[${s}]//$'\n'/; }"
  few=$(query "${name}" 'count_over_time(up{job="deployment_service_probe"}[1m]) < 3 or deployment_service_up{job="deployment_service_probe"} != 1' |
    jq -r '.[] | "\(.metric.module) \(.metric.instance)"')
  [[ -z "${few}" ]] || fail "${name} scraped these fewer than 3 times or sees them down: ${few//$'\n'/; }"
  # The exporter's own job on every shard; its absence alert quiet.
  [[ $(query "${name}" 'up{job="deployment_service"} == 1' | jq length) == 1 ]] ||
    fail "${name} does not scrape the exporter's own metrics (job deployment_service)"
  [[ $(query "${name}" 'absent(up{job="deployment_service"})' | jq length) == 0 ]] ||
    fail "${name}: absent(up{job=\"deployment_service\"}) fires"
done

# Each /sd target on exactly one shard.
all=$(printf '%s\n' "${got_on[0]}" "${got_on[1]}" | sed '/^$/d' | sort)
twice=$(uniq -d <<<"${all}")
missing=$(comm -23 <(printf '%s\n' "${sd_pairs[@]}") <(sort -u <<<"${all}"))
extra=$(comm -13 <(printf '%s\n' "${sd_pairs[@]}") <(sort -u <<<"${all}"))
[[ -z "${twice}" ]] || fail "targets with series on both shards: ${twice//$'\n'/; }"
[[ -z "${missing}" ]] || fail "targets on no shard (hashmod ${modulus} of their URL is neither ${shard_numbers[0]} nor ${shard_numbers[1]}): ${missing//$'\n'/; }"
[[ -z "${extra}" ]] || fail "targets on a shard that /sd does not hand over: ${extra//$'\n'/; }"
# On the shard hashmod gives the service's URL, as computed here: the hash
# is of the service (not of the exporter's address, as it would be after
# the relabelling that moves the URL to the target parameter), and both
# Prometheus versions hash alike.
for s in 0 1; do
  want=$(sed '/^$/d' <<<"${want_on[${s}]}" | sort)
  [[ "${got_on[${s}]}" == "${want}" ]] ||
    fail "shard${s} (Prometheus ${versions[s]}) holds ${got_on[${s}]//$'\n'/; }; hashmod ${modulus} of the URLs = ${shard_numbers[s]} gives ${want//$'\n'/; }"
done
# A service's series, of all its modules and the recording rules, on one
# shard.
split=$(printf '%s\n' "${services_on[0]}" "${services_on[1]}" | sed '/^$/d' | sort | uniq -d)
[[ -z "${split}" ]] || fail "services with series on both shards: ${split//$'\n'/; }"
n0=$(sed '/^$/d' <<<"${got_on[0]}" | wc -l)
n1=$(sed '/^$/d' <<<"${got_on[1]}" | wc -l)
[[ ${n0} -gt 0 && ${n1} -gt 0 ]] || fail "one shard holds every target (${n0} and ${n1}): no sharding"
[[ ${failed} -eq 0 ]] || die "the sharded configuration does not put each target on exactly one shard"
log "ok: every one of the ${#sd_pairs[@]} /sd targets has series on exactly one shard, the one hashmod gives its URL: ${n0} on shard ${shard_numbers[0]} (Prometheus ${versions[0]}), ${n1} on shard ${shard_numbers[1]} (${versions[1]}); a service's modules together; both scrape the exporter's own job, DeploymentServiceExporterAbsent quiet"
stop "${prom_pid[shard0]}" "${prom_pid[shard1]}" "${exporter_pid}" "${fakeapi_pid[shard]}"

# --- HA pair ----------------------------------------------------------------

start_fakeapi_on ha 4
start_fakeapi_on control 4
mapfile -t ha_urls < <(urls_of ha)
mapfile -t control_urls < <(urls_of control)
{
  echo modules:
  module_yaml default "    min_interval: ${min_interval}" "${ha_urls[@]}"
  module_yaml control "    min_interval: 0s" "${control_urls[@]}"
} >"${work}/ha-modules.yml"
start_exporter ha-exporter "${work}/ha-modules.yml"
reset_stats ha
reset_stats control

log "HA pair: replica a on Prometheus ${versions[0]}, replica b on ${versions[1]}; module default (4 services) with min_interval ${min_interval}, module control (4 services) with 0s"
for r in 0 1; do
  replica=$([[ ${r} == 0 ]] && echo a || echo b)
  ha_config "${replica}" | for_test >"${work}/replica-${replica}.yml"
  start_prometheus "replica-${replica}" "${versions[r]}" "${work}/replica-${replica}.yml"
done
for r in a b; do
  wait_query "replica-${r}" 'count(count_over_time(up{job="deployment_service_probe"}[1m]) >= 2) == 8' 60
done
# Both scrape every target now: measure the next ${window} seconds.
t1=$(($(date +%s) + window))
sleep $((t1 - $(date +%s)))
sleep 2 # for the scrapes up to t1 to be stored

# Per replica and target: scrapes in the window, and the first and last
# polls_total their answers carried.
for r in a b; do
  for what in "count_over_time(up{job=\"deployment_service_probe\"}[${window}s])" \
    "min_over_time(deployment_service_polls_total{job=\"deployment_service_probe\"}[${window}s])" \
    "max_over_time(deployment_service_polls_total{job=\"deployment_service_probe\"}[${window}s])" \
    "deployment_service_up{job=\"deployment_service_probe\"} == 1"; do
    query "replica-${r}" "${what}" "${t1}" | jq -c --arg what "${what%%[({]*}" '[.[] | {what: $what, module: .metric.module, instance: .metric.instance, value: (.value[1] | tonumber)}]'
  done | jq -s --arg r "${r}" '[add[] | . + {replica: $r}]' >"${work}/ha-${r}.json"
done
# Per module: targets, scrapes of each replica, polls (per target, the last
# polls_total either replica saw less the first either saw), and rounds
# (per target, the scrapes of the replica that scraped it more).
jq -s '
  add | group_by(.module)[] | {
    module: .[0].module,
    up: ([.[] | select(.what == "deployment_service_up")] | length),
    targets: ([.[].instance] | unique | length),
    a: ([.[] | select(.what == "count_over_time" and .replica == "a") | .value] | add),
    b: ([.[] | select(.what == "count_over_time" and .replica == "b") | .value] | add),
    rounds: ([group_by(.instance)[] | [.[] | select(.what == "count_over_time") | .value] | max] | add),
    polls: ([group_by(.instance)[] |
      ([.[] | select(.what == "max_over_time") | .value] | max) -
      ([.[] | select(.what == "min_over_time") | .value] | min)] | add)
  }' "${work}/ha-a.json" "${work}/ha-b.json" >"${work}/ha-summary.json"
declare -A polls rounds
for m in default control; do
  read -r targets up a b "rounds[${m}]" "polls[${m}]" < <(jq -r --arg m "${m}" \
    'select(.module == $m) | "\(.targets) \(.up) \(.a) \(.b) \(.rounds) \(.polls)"' "${work}/ha-summary.json")
  [[ "${targets:-0}" == 4 && "${up}" == 8 ]] ||
    fail "module ${m}: ${targets:-0} targets in the window, ${up:-0} of them up on the two replicas; want 4, each up on both"
  # Both replicas scraped every target about once a second.
  for n in "${a:-0}" "${b:-0}"; do
    [[ ${n} -ge $((4 * (window - 2))) ]] || fail "module ${m}: a replica scraped its 4 targets ${n} times in ${window}s, want about $((4 * window))"
  done
  # After the first answer of each target in the window: a + b - 4
  # scrapes, and the polls counted.
  ratio=$(awk -v p="${polls[${m}]}" -v n=$((a + b - 4)) 'BEGIN { printf "%.2f", 2 * p / n }')
  log "module ${m}: in ${window}s replica a scraped its 4 targets ${a} times, replica b ${b} times; after the first answer of each, ${polls[${m}]} polls for $((a + b - 4)) scrapes: ${ratio} per pair of scrapes"
done
[[ ${failed} -eq 0 ]] || die "the HA pair did not scrape every target on both replicas"
# One poll per round gives at most as many polls as rounds (as many when a
# target's first answer in the window came from a poll just before it);
# 2 more allow for a replica whose scrapes come just a min-interval after
# the other's, which may poll once more before it takes over the polling.
(( polls[default] <= rounds[default] + 2 )) ||
  fail "module default: ${polls[default]} polls for ${rounds[default]} rounds of the pair's scrapes: a pair's scrapes cost more than one poll (min_interval ${min_interval})"
(( polls[control] > rounds[control] + 2 )) ||
  fail "module control (min_interval 0s): ${polls[control]} polls for ${rounds[control]} rounds: no more than with a min-interval, so this check could not tell"

# polls_total against the service's count: one GET of the API root per poll
# since the exporter started (after the counts were reset). The services
# may have seen the polls of up to a scrape per target and replica whose
# answer is not stored yet.
for m in default control; do
  svc=$([[ ${m} == default ]] && echo ha || echo control)
  exported=$(for r in a b; do query "replica-${r}" "deployment_service_polls_total{module=\"${m}\"}"; done |
    jq -s '[add[] | {i: .metric.instance, v: (.value[1] | tonumber)}] | group_by(.i) | map(max_by(.v).v) | add')
  roots=$(roots_of "${svc}")
  if (( roots >= exported && roots <= exported + 8 )); then
    log "ok: module ${m}: the services had ${roots} polls (GET of the API root), polls_total says ${exported}"
  else
    fail "module ${m}: the services had ${roots} polls (GET of the API root), polls_total says ${exported}"
  fi
done
[[ ${failed} -eq 0 ]] || die "the HA pair's scrapes do not share polls as they should"
log "ok: the HA pair's two scrapes of a target cost one poll with min_interval ${min_interval} (${polls[default]} polls, ${rounds[default]} rounds), two without (${polls[control]} polls, ${rounds[control]} rounds)"
stop "${prom_pid[replica-a]}" "${prom_pid[replica-b]}"
log "ok: scaling examples checked in $((SECONDS - t_start))s"
