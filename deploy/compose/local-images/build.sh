#!/usr/bin/env bash
# Local stand-ins for the compose file's public Kafka and PostgreSQL images, for machines that cannot
# pull them (our test machines): Debian bookworm from the Debian mirror (mmdebstrap), the Kafka jars
# deploy/local/kafka.sh fetched from Maven Central (started by the compose file's config/kafka/start.sh,
# as apache/kafka is), Debian's postgresql-15 (configured by the same variables as postgres). Kept once
# built.
#   deploy/compose/local-images/build.sh     → localhost/robustrl-kafka:3.9.1, localhost/robustrl-postgres:15
set -euo pipefail
DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${DIR}/../../.." && pwd)"
# shellcheck source=../../image/podman.sh
source "${ROOT}/deploy/image/podman.sh" --install

rootfs_image() { # TAG PACKAGES SETUP-FUNCTION
  local tag="$1" packages="$2" setup="$3" work
  if podman image exists "${tag}"; then echo "[local-images] ${tag} exists" >&2; return 0; fi
  work="$(mktemp -d "${TMPDIR:-/tmp}/robustrl-img.XXXXXX")"
  echo "[local-images] mmdebstrap bookworm (${packages}) for ${tag}" >&2
  mmdebstrap --quiet --variant=minbase --include="${packages}" bookworm "${work}/rootfs" >&2
  "${setup}" "${work}/rootfs"
  tar -C "${work}/rootfs" -c . | podman import - "${tag}" >&2
  rm -rf "${work}"
  echo "[local-images] built ${tag}" >&2
}

kafka_setup() {
  local rootfs="$1" libs="${ROOT}/.local/kafka/libs"
  [[ -d "${libs}" ]] || bash "${ROOT}/deploy/local/kafka.sh" install >&2
  mkdir -p "${rootfs}/opt/kafka" "${rootfs}/var/lib/kafka"
  cp -r "${libs}" "${rootfs}/opt/kafka/libs"
  printf '%s\n' 'log4j.rootLogger=INFO, stdout' 'log4j.appender.stdout=org.apache.log4j.ConsoleAppender' \
    'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout' 'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n' \
    'log4j.logger.state.change.logger=WARN' >"${rootfs}/opt/kafka/log4j.properties"
}
postgres_setup() {
  install -m 0755 "${DIR}/postgres-run.sh" "$1/usr/local/bin/postgres-run"
}

rootfs_image localhost/robustrl-kafka:3.9.1 openjdk-17-jre-headless kafka_setup
rootfs_image localhost/robustrl-postgres:15 postgresql-15,util-linux postgres_setup
