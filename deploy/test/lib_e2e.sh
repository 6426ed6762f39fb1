# Helpers of the end-to-end checks (e2e_prometheus.sh, e2e_victoriametrics.sh).
# Source it after lib.sh and call start_work first; do not run it.
# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034 # repo, work and pids come from lib.sh; the scripts read what e2e_start sets.

# e2e_start: builds the exporter, tools/cmd/promqlcheck and three sample
# services (bench/cmd/fakeapi, one process each), and starts the exporter
# with --demo (its /metrics target watches an embedded sample service) and a
# --config.file of three modules: module default lists svc1, module second
# lists svc2 (in another spelling) and a pattern, module local only the
# pattern http://127.0.0.1:*; svc3 runs but no module lists it by name.
# Before any server scrapes it, the exporter must answer /probe of each
# listed service, a 403 that sends svc3 nothing for module default, a probe
# of svc3 through the pattern of module local, and on /sd exactly the two
# listed services with their modules (patterns left out). Sets exporter,
# promqlcheck, exporter_addr, exporter_port, urls, controls, listed (the
# "module target" pairs a server must probe) and probe_urls.
e2e_start() {
  exporter=$(exporter_binary "${work}")
  promqlcheck=$(tools_binary promqlcheck "${work}")
  (cd "${repo}" && go build -o "${work}/fakeapi" ./bench/cmd/fakeapi)

  # scripts/build.sh put the version information in through -ldflags.
  local version
  version=$("${exporter}" --version 2>&1) || die "${exporter} --version failed: ${version}"
  grep -qE 'build date: +[0-9]{4}-[0-9]{2}-[0-9]{2}T' <<<"${version}" ||
    die "the binary carries no build date; are the -X ldflags of scripts/build.sh still right? ${version}"
  log "ok: $(head -n 1 <<<"${version}")"

  # Three sample services for /probe. fakeapi runs until its stdin closes:
  # each reads a FIFO that this script holds open until it exits.
  local key name
  key=e2e-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
  printf '%s\n' "${key}" >"${work}/key"
  chmod 600 "${work}/key"
  declare -gA urls controls
  for name in svc1 svc2 svc3; do
    start_fakeapi "${name}" -key "${key}" -page-size 50 -latency 2ms -jitter 10ms
    urls[${name}]=$(jq -r .url "${work}/${name}.json")
    controls[${name}]=$(jq -r .control "${work}/${name}.json")
    [[ "${urls[${name}]}" == http://127.0.0.1:* ]] || die "sample service ${name} did not start"
  done
  log "ok: ${#fifo_fds[@]} sample services for /probe: svc1 ${urls[svc1]}, svc2 ${urls[svc2]}, svc3 ${urls[svc3]}"

  # The services a server must probe, as "module target" pairs, and their
  # URLs: exactly the concrete targets of the modules below.
  listed=("default ${urls[svc1]}" "second ${urls[svc2]}")
  probe_urls=("${urls[svc1]}" "${urls[svc2]}")
  local module_yaml
  module_yaml=$(
    cat <<YAML
    http_client_config:
      authorization:
        type: Token
        credentials_file: ${work}/key
    timeout: 5s
    locations:
      detail_limit: 5
      info_fields: [name]
YAML
  )
  # svc2 is spelled as /probe would not: /sd hands it over in /probe's spelling.
  cat >"${work}/modules.yml" <<YAML
modules:
  default:
    targets: ["${urls[svc1]}"]
${module_yaml}
  second:
    targets:
      - ${urls[svc2]/http:/HTTP:}/
      - http://localhost:*
${module_yaml}
  local:
    targets: ["http://127.0.0.1:*"]
${module_yaml}
YAML
  "${exporter}" --config.check --config.file="${work}/modules.yml" >/dev/null || die "--config.check refuses ${work}/modules.yml"

  exporter_port=$(free_port)
  exporter_addr="127.0.0.1:${exporter_port}"
  log "starting the exporter in demo mode with /probe modules on ${exporter_addr}"
  "${exporter}" --demo \
    --locations.detail-limit=5 \
    --locations.info-field=name \
    --config.file="${work}/modules.yml" \
    --web.listen-address="${exporter_addr}" \
    --log.level=debug >"${work}/exporter.log" 2>&1 &
  pids+=($!)
  wait_http "http://${exporter_addr}/-/healthy" 30 || die "exporter did not answer /-/healthy"
  wait_http "http://${exporter_addr}/-/ready" 30 || die "exporter did not answer /-/ready"
  log "ok: /-/healthy and /-/ready answer 200"
  local pair module url code got want
  for pair in "${listed[@]}"; do
    module=${pair%% *} url=${pair#* }
    curl -fsS --get --data-urlencode "target=${url}" --data-urlencode "module=${module}" "http://${exporter_addr}/probe" |
      grep -q '^deployment_service_up 1$' || die "/probe?target=${url}&module=${module} does not answer deployment_service_up 1"
  done
  log "ok: /probe reads both listed sample services with their modules"

  curl -fsS -X POST "${controls[svc3]}/reset"
  code=$(curl -sS -o "${work}/403.txt" -w '%{http_code}' --get --data-urlencode "target=${urls[svc3]}" \
    --data-urlencode module=default "http://${exporter_addr}/probe")
  [[ "${code}" == 403 ]] || die "/probe of the unlisted svc3 with module default answered ${code}, want 403: $(head -c 300 "${work}/403.txt")"
  [[ $(svc3_requests) == 0 ]] || die "the refused /probe of svc3 still sent it $(svc3_requests) request(s)"
  curl -fsS --get --data-urlencode "target=${urls[svc3]}" --data-urlencode module=local "http://${exporter_addr}/probe" |
    grep -q '^deployment_service_up 1$' || die "/probe of svc3 with module local (pattern http://127.0.0.1:*) does not answer deployment_service_up 1"
  [[ $(svc3_requests) -gt 0 ]] || die "svc3 counted no request from the probe through module local"
  curl -fsS -X POST "${controls[svc3]}/reset"
  log "ok: /probe of svc3: 403 and no request with module default, read through module local's pattern"

  # /sd: one group per module with concrete targets, in /probe's spelling;
  # module local (a pattern only) has none.
  curl -fsS "http://${exporter_addr}/sd" >"${work}/sd.json"
  got=$(jq -r '.[] | select(.labels.module == .labels.__param_module) | .labels.module as $m | .targets[] | "\($m) \(.)"' \
    "${work}/sd.json" | sort)
  want=$(printf '%s\n' "${listed[@]}" | sort)
  [[ "${got}" == "${want}" ]] || die "/sd answers $(cat "${work}/sd.json"); want the pairs: ${want}"
  [[ $(jq length "${work}/sd.json") == 2 ]] || die "/sd has $(jq length "${work}/sd.json") groups, want 2: $(cat "${work}/sd.json")"
  [[ $(curl -fsS "http://${exporter_addr}/sd?module=second" | jq -r '[.[].targets[]] | join(" ")') == "${urls[svc2]}" ]] ||
    die "/sd?module=second does not answer svc2 alone"
  code=$(curl -sS -o /dev/null -w '%{http_code}' "http://${exporter_addr}/sd?module=nope")
  [[ "${code}" == 400 ]] || die "/sd?module=nope answered ${code}, want 400"
  log "ok: /sd hands over svc1 (default) and svc2 (second), nothing of the patterns"
}

# svc3_requests: prints how many requests svc3 has had since its last reset.
svc3_requests() { curl -fsS "${controls[svc3]}/stats" | jq -r .total; }

# scrape_job NAME EXTRA: a /metrics scrape job of the exporter, as YAML.
scrape_job() {
  local name=$1 extra=$2
  cat <<YAML
  - job_name: ${name}
${extra}
    static_configs:
      - targets: ["${exporter_addr}"]
YAML
}

# sd_job FILE EXTRA: the /probe job deployment_service_probe of FILE as
# shipped (its last job: HTTP service discovery on the exporter's /sd and
# the relabelling), with this exporter's address, a scrape every second, a
# discovery refresh every second where FILE sets one, and the lines EXTRA.
sd_job() {
  local file=$1 job
  job=$(awk '/^  - job_name: deployment_service_probe$/ { on = 1 } on' "${file}" |
    sed -e "s#localhost:10044#${exporter_addr}#g" -e 's/^\( *scrape_interval:\).*/\1 1s/' \
      -e 's/^\( *scrape_timeout:\).*/\1 1s/' -e 's/^\( *refresh_interval:\).*/\1 1s/' |
    EXTRA="$2" awk '{ print } /^    metrics_path: \/probe$/ && ENVIRON["EXTRA"] != "" { print ENVIRON["EXTRA"] }')
  if ! grep -q "url: http://${exporter_addr}/sd$" <<<"${job}" || ! grep -q "replacement: ${exporter_addr}$" <<<"${job}"; then
    die "${file#"${repo}/"} has no job deployment_service_probe of the shape this check adapts: ${job}"
  fi
  printf '%s\n' "${job}"
}

# instant_count URL EXPR: prints the value of count(EXPR), 0 when empty.
instant_count() {
  curl -fsS --get --data-urlencode "query=count(${2})" "${1}/api/v1/query" |
    jq -r '.data.result[0].value[1] // "0"'
}

# promqlcheck_args URL N_TARGETS: the arguments of promqlcheck that wait
# until N_TARGETS targets are up with 8 samples each, and check every
# dashboard and rule file of the repository.
promqlcheck_args() {
  local d r
  args=(-prometheus "$1" -wait-timeout 90s
    -wait "count(up == 1) == $2"
    -wait "count(count_over_time(deployment_service_up[1m]) >= 8) == $2")
  for d in "${repo}"/grafana/dashboards/*.json; do args+=(-dashboard "${d}"); done
  for r in "${repo}"/deploy/prometheus/rules/*.yml; do args+=(-rules "${r}"); done
}

# check_discovery NAME URL JOB: the /probe job JOB of the server at URL
# found its targets through /sd: exactly the listed services, each scraped
# through /probe with its module and up, and svc3 nowhere in its targets,
# active or dropped. Says what is wrong and returns 1, or 0.
check_discovery() {
  local name=$1 prom=$2 job=$3 want got n
  curl -fsS "${prom}/api/v1/targets" >"${work}/${name}-targets.json"
  want=$(printf '%s\n' "${listed[@]}" | sort)
  # Each active target of the job: its module and instance, when the scrape
  # URL is /probe of the exporter with that module and instance as target,
  # and it is up; else what it is.
  got=$(jq -r --arg job "${job}" --arg exporter "${exporter_addr}" '
    .data.activeTargets[] | select(.labels.job == $job) |
    (.labels.instance | @uri) as $target | .labels.module as $mod |
    if (.scrapeUrl | startswith("http://\($exporter)/probe?")) and
       (.scrapeUrl | test("[?&]module=\($mod)(&|$)")) and
       (.scrapeUrl | contains("target=\($target)")) and .health == "up"
    then "\(.labels.module) \(.labels.instance)"
    else "WRONG: \(.scrapeUrl) health \(.health) labels \(.labels | tostring)" end
  ' "${work}/${name}-targets.json" | sort)
  if [[ "${got}" != "${want}" ]]; then
    log "FAIL: ${name} scrapes through /sd: ${got//$'\n'/; }; want: ${want//$'\n'/; }"
    return 1
  fi
  if grep -qF "${urls[svc3]#http://}" "${work}/${name}-targets.json"; then
    log "FAIL: ${name} has the unlisted svc3 (${urls[svc3]}) among its targets: ${work}/${name}-targets.json"
    return 1
  fi
  # And in the data: deployment_service_up of every listed service, 1, with
  # its module; of no other.
  got=$(curl -fsS --get --data-urlencode "query=deployment_service_up{job=\"${job}\"}" "${prom}/api/v1/query" |
    jq -r '.data.result[] | "\(.metric.module) \(.metric.instance) \(.value[1])"' | sort)
  if [[ "${got}" != "$(sed 's/$/ 1/' <<<"${want}")" ]]; then
    log "FAIL: ${name} deployment_service_up{job=\"${job}\"}: ${got//$'\n'/; }; want each of ${want//$'\n'/; } at 1"
    return 1
  fi
  n=$(wc -l <<<"${want}")
  log "ok: ${name} discovered ${n} /probe targets through /sd, as many as the modules list, each up with its module; svc3 not among them"
}
