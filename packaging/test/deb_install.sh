#!/usr/bin/env bash
# Installs a .deb of deployment-service-exporter on this machine and checks
# it as a user would meet it, then removes it again:
#
#   packaging/test/deb_install.sh dist/deployment-service-exporter_*_amd64.deb
#
# Checked: dpkg -i works on a machine without the service's user; the files,
# their modes and owners; the binary runs --version; the system user has no
# login and no home; `systemd-analyze verify` on the installed unit prints
# nothing; `systemd-analyze security --offline=true` rates it OK or better;
# the service's user reads the key directory and nobody else does; the
# exporter started as systemd starts it (that user, the environment file,
# $ARGS) serves, and SIGHUP (systemctl reload) reloads its --config.file;
# dpkg -r leaves only the conffile and dpkg -P leaves nothing but the system
# user, which this script then deletes if it created it.
#
# It changes the machine (a package, a user) and refuses to run where the
# package is installed or its configuration is present: meant for CI, as
# root. There is no systemd as PID 1 here, so the unit's sandbox itself is
# not run, only analysed.
set -euo pipefail
deb=${1:?usage: $0 PACKAGE.deb}
deb=$(realpath "${deb}")
name=deployment-service-exporter
bin=/usr/bin/deployment_service_exporter
unit=/usr/lib/systemd/system/${name}.service
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

[[ $(id -u) == 0 ]] || fail "run as root (dpkg -i)"
if dpkg-query -W -f '${Status}' "${name}" 2>/dev/null | grep -q 'installed\|config-files'; then
  fail "${name} is installed here already; this test would replace and purge it"
fi
[[ ! -e /etc/${name} && ! -e /etc/default/${name} ]] || fail "/etc/${name} or /etc/default/${name} exists: not a clean machine"
user_existed=0
getent passwd "${name}" >/dev/null && user_existed=1

work=$(mktemp -d)
pid=
cleanup() {
  if [[ -n "${pid}" ]]; then kill "${pid}" 2>/dev/null || true; fi
  # What this test put in the key directory, when it stopped half-way.
  [[ -d "/etc/${name}" ]] && rm -f "/etc/${name}/modules.yml" "/etc/${name}/api-key"
  if dpkg-query -W "${name}" >/dev/null 2>&1; then dpkg -P "${name}" >/dev/null 2>&1 || true; fi
  if [[ ${user_existed} == 0 ]] && getent passwd "${name}" >/dev/null; then
    userdel "${name}" 2>/dev/null || true
    if getent group "${name}" >/dev/null; then groupdel "${name}" 2>/dev/null || true; fi
  fi
  rm -rf "${work}"
}
trap cleanup EXIT

echo "--- dpkg -i $(basename "${deb}")"
dpkg -i "${deb}" >"${work}/install.log" 2>&1 || { cat "${work}/install.log"; fail "dpkg -i"; }
grep -q "systemctl enable --now ${name}" "${work}/install.log" || fail "postinst does not say how to start the service"
ok "installed; postinst says what to configure before systemctl enable --now"

# mode owner:group path, as stat prints them.
expect_stat() {
  local want=$1 path=$2 have
  have=$(stat -c '%a %U:%G' "${path}" 2>/dev/null) || fail "${path} is missing"
  [[ "${have}" == "${want}" ]] || fail "${path} is ${have}, want ${want}"
  ok "${path} ${have}"
}
expect_stat "755 root:root" "${bin}"
expect_stat "644 root:root" "${unit}"
expect_stat "600 root:root" "/etc/default/${name}"
expect_stat "750 root:${name}" "/etc/${name}"
for doc in LICENSE NOTICE THIRD_PARTY_LICENSES README.md INSTALL.md examples/modules.yml; do
  expect_stat "644 root:root" "/usr/share/doc/${name}/${doc}"
done
dpkg-query -W -f '${Conffiles}\n' "${name}" | grep -q "^ /etc/default/${name} " || fail "/etc/default/${name} is not a conffile"
ok "/etc/default/${name} is a conffile"

"${bin}" --version >"${work}/version" 2>&1 || fail "${bin} --version"
head -n 1 "${work}/version"
grep -q "version $(dpkg-query -W -f '${Version}' "${name}" | tr '~' '-')" "${work}/version" ||
  fail "--version does not name the package's version"
ok "--version names the package's version"

IFS=: read -r _ _ uid _ _ home shell < <(getent passwd "${name}")
((uid < 1000)) || fail "user ${name} has uid ${uid}, not a system uid"
[[ "${shell}" == */nologin && ! -e "${home}" ]] || fail "user ${name} has shell ${shell} and home ${home}"
ok "system user ${name} (uid ${uid}), no login, no home"

echo "--- the installed unit"
"${here}/unit.sh" "${unit}"

echo "--- the key directory and a start as systemd does it"
port=$((20000 + RANDOM % 40000))
conf=/etc/${name}/modules.yml
install -m 0640 -o root -g "${name}" /dev/stdin "/etc/${name}/api-key" <<<"test-key-not-secret"
write_modules() { # TARGET...
  {
    echo "modules:"
    echo "  default:"
    echo "    targets:"
    printf '      - %s\n' "$@"
    echo "    http_client_config:"
    echo "      authorization: {type: Token, credentials_file: /etc/${name}/api-key}"
  } | install -m 0640 -o root -g "${name}" /dev/stdin "${conf}"
}
write_modules http://127.0.0.1:9/one
# As systemd's User= and Group= do: exec, no fork, so that $! is the exporter.
as_service=(setpriv --reuid="${name}" --regid="${name}" --init-groups --no-new-privs --)
as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
"${as_service[@]}" cat "/etc/${name}/api-key" >/dev/null || fail "the service's user cannot read the key"
if "${as_nobody[@]}" cat "/etc/${name}/api-key" >/dev/null 2>&1; then fail "user nobody reads the key"; fi
if "${as_nobody[@]}" ls "/etc/${name}" >/dev/null 2>&1; then fail "user nobody lists /etc/${name}"; fi
ok "the key is readable by ${name}, not by nobody"

# The service's environment: the environment file as systemd reads it (plain
# assignments), the flags of ARGS with the module file and a free port.
sed -i "s|^ARGS=.*|ARGS=\"--config.file=${conf} --web.listen-address=127.0.0.1:${port}\"|" "/etc/default/${name}"
env_args=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
while IFS= read -r line; do
  [[ "${line}" =~ ^[A-Z_]+= ]] && env_args+=("${line%%=*}=$(eval "printf '%s' ${line#*=}")")
done <"/etc/default/${name}"
# shellcheck disable=SC2016 # $ARGS is expanded by that shell, in that environment.
args=$(env -i "${env_args[@]}" sh -c 'printf %s "$ARGS"')
# shellcheck disable=SC2086 # ARGS is split as systemd splits $ARGS.
env -i "${env_args[@]}" "${as_service[@]}" "${bin}" --config.check ${args} >"${work}/check" 2>&1 ||
  { cat "${work}/check"; fail "--config.check as ${name} with the environment file"; }
ok "--config.check as ${name} with /etc/default/${name}: $(tail -n 1 "${work}/check")"
# shellcheck disable=SC2086
env -i "${env_args[@]}" "${as_service[@]}" "${bin}" ${args} >"${work}/log" 2>&1 &
pid=$!
sd() { curl -fsS --max-time 2 "http://127.0.0.1:${port}/sd" 2>/dev/null || true; }
for ((i = 0; i < 40; i++)); do
  [[ "$(sd)" == *127.0.0.1:9/one* ]] && break
  sleep 0.25
done
[[ "$(sd)" == *127.0.0.1:9/one* ]] || { cat "${work}/log"; fail "the exporter, started as ${name}, does not serve /sd"; }
[[ "$(ps -o user= -p "${pid}")" == "${name}" ]] || fail "the exporter does not run as ${name}"
ok "the exporter runs as ${name} and serves the module's target on /sd"
write_modules http://127.0.0.1:9/one http://127.0.0.1:9/two
kill -HUP "${pid}" # what ExecReload does
for ((i = 0; i < 40; i++)); do
  [[ "$(sd)" == *127.0.0.1:9/two* ]] && break
  sleep 0.25
done
[[ "$(sd)" == *127.0.0.1:9/two* ]] || { cat "${work}/log"; fail "SIGHUP did not reload ${conf}"; }
kill -0 "${pid}" || fail "the exporter died on SIGHUP"
ok "SIGHUP (ExecReload) reloads the module file"
kill "${pid}"
wait "${pid}" 2>/dev/null || true
pid=
rm -f "${conf}"

echo "--- dpkg -r, then dpkg -P"
dpkg -r "${name}" >"${work}/remove.log" 2>&1 || { cat "${work}/remove.log"; fail "dpkg -r"; }
[[ ! -e "${bin}" && ! -e "${unit}" && ! -e "/usr/share/doc/${name}" ]] || fail "dpkg -r left files behind"
[[ -e "/etc/default/${name}" && -e "/etc/${name}/api-key" ]] || fail "dpkg -r removed the conffile or the key (only purge should)"
ok "dpkg -r removed the binary, unit and docs; kept the conffile and the key"
dpkg -P "${name}" >"${work}/purge.log" 2>&1 || { cat "${work}/purge.log"; fail "dpkg -P"; }
left=$(find /etc/default/"${name}" /etc/"${name}" /usr/share/doc/"${name}" "${bin}" "${unit}" 2>/dev/null || true)
[[ -z "${left}" ]] || fail "dpkg -P left: ${left}"
if dpkg-query -W "${name}" >/dev/null 2>&1; then fail "dpkg still knows ${name} after purge"; fi
ok "dpkg -P removed everything, key and key directory included (the system user stays, as Debian keeps them)"
