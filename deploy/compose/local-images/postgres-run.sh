#!/bin/sh
# PostgreSQL in the foreground, configured as the postgres image is: POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB; the cluster is created on first start in /var/lib/postgresql/data.
set -eu
BIN=/usr/lib/postgresql/15/bin
DATA=/var/lib/postgresql/data
mkdir -p "${DATA}" /var/run/postgresql
chown -R postgres:postgres "${DATA}" /var/run/postgresql
if [ ! -f "${DATA}/PG_VERSION" ]; then
  pw="$(mktemp)"
  printf '%s\n' "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD is required}" >"${pw}"
  chown postgres "${pw}"
  runuser -u postgres -- "${BIN}/initdb" -D "${DATA}" -U "${POSTGRES_USER:-postgres}" --pwfile="${pw}" --auth-host=scram-sha-256 --auth-local=trust >/dev/null
  rm -f "${pw}"
  echo "listen_addresses = '*'" >>"${DATA}/postgresql.conf"
  echo "host all all 0.0.0.0/0 scram-sha-256" >>"${DATA}/pg_hba.conf"
  runuser -u postgres -- "${BIN}/pg_ctl" -D "${DATA}" -o "-c listen_addresses=''" -w start >/dev/null
  db="${POSTGRES_DB:-${POSTGRES_USER:-postgres}}"
  [ "${db}" = postgres ] || runuser -u postgres -- psql -U "${POSTGRES_USER:-postgres}" -d postgres -c "CREATE DATABASE \"${db}\"" >/dev/null
  runuser -u postgres -- "${BIN}/pg_ctl" -D "${DATA}" -m fast -w stop >/dev/null
fi
exec runuser -u postgres -- "${BIN}/postgres" -D "${DATA}"
