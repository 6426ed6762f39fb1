#!/bin/sh
# Runs before the package's files are unpacked (deb: preinst install or
# upgrade; rpm: %pre 1 or 2): creates the system user and group the service
# runs as, which also own the key directory /etc/deployment-service-exporter
# (so they must exist before it is unpacked). Both are kept on removal, as
# Debian and Fedora keep system accounts: files may still belong to them.
set -e
name=deployment-service-exporter

if ! getent group "${name}" >/dev/null; then
  groupadd --system "${name}"
fi
if ! getent passwd "${name}" >/dev/null; then
  useradd --system --gid "${name}" --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin --comment "deployment_service_exporter" "${name}"
fi
