#!/bin/sh
# Runs after the files are removed. Arguments: deb: remove, purge, upgrade,
# ...; rpm: 0 (erase) or 1 and more (upgrade).
#
# deb purge also deletes the key file this package tells you to create, and
# the then empty key directory; /etc/default/deployment-service-exporter goes
# with dpkg's purge of conffiles. The system user stays (see preinstall).
set -e
name=deployment-service-exporter

case "$1" in
purge)
  rm -f "/etc/${name}/api-key"
  rmdir "/etc/${name}" 2>/dev/null || true
  ;;
remove | 0) ;;
*) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
