#!/bin/sh
# Runs before the files are removed. Arguments: deb: remove, upgrade NEW,
# ...; rpm: 0 (erase) or 1 and more (upgrade). Only a removal stops and
# disables the service; an upgrade leaves it to postinstall's restart.
set -e
name=deployment-service-exporter

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac

if command -v systemctl >/dev/null 2>&1; then
  systemctl --no-reload disable "${name}.service" >/dev/null 2>&1 || true
  if [ -d /run/systemd/system ]; then
    systemctl stop "${name}.service" >/dev/null 2>&1 || true
  fi
fi
