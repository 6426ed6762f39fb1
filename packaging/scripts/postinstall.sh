#!/bin/sh
# Runs after the files are unpacked. Arguments: deb: configure [OLD-VERSION];
# rpm: 1 (install) or 2 and more (upgrade).
#
# A fresh install does not start the service: it needs the service's URL and
# key first, and says so. An upgrade restarts it if it was running.
set -e
name=deployment-service-exporter

case "$1" in
configure) if [ -n "$2" ]; then upgrade=1; else upgrade=0; fi ;;
1) upgrade=0 ;;
[0-9]*) upgrade=1 ;;
*) exit 0 ;; # deb: abort-upgrade, abort-remove, ...
esac

if [ "${upgrade}" = 0 ]; then
  # The package declares this ownership; set it again in case the package
  # manager unpacked the directory before the group resolved.
  chown root:"${name}" "/etc/${name}"
  chmod 0750 "/etc/${name}"
fi

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
  if [ "${upgrade}" = 1 ]; then
    systemctl try-restart "${name}.service" >/dev/null 2>&1 || true
  fi
fi

if [ "${upgrade}" = 0 ]; then
  cat <<MSG
${name}: to start it, set DEPLOYMENT_SERVICE_URL in /etc/default/${name},
put the API key in /etc/${name}/api-key:
  install -m 0640 -o root -g ${name} ./api-key /etc/${name}/api-key
and run: systemctl enable --now ${name}
MSG
fi
