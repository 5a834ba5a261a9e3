#!/usr/bin/env bash
# A Python 3.11 base image made from Debian bookworm's own packages, for machines that cannot pull
# python:3.11-slim-bookworm from Docker Hub (only the Debian archive is reached):
#
#   bash deploy/base_image.sh [TAG]      # as root; TAG defaults to lpos-base:bookworm
#   docker build -f deploy/Dockerfile --build-arg BASE=lpos-base:bookworm -t lpos .
#
# What python:3.11-slim-bookworm gives the Dockerfile, from Debian instead of python.org's build:
# `python3` (Debian's 3.11 with venv and ensurepip), `python`, CA certificates, apt sources for
# bookworm, its updates and its security archive (the hall's HAProxy and Redis images install from
# them), and debian:bookworm-slim's habit of installing no documentation or translations.
# debootstrap writes a minimal system into a scratch folder, apt adds Python with the latest
# security updates, and `docker import` turns the folder into a one-layer image.
# DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR name other archives (a local mirror, a proxy).
set -euo pipefail
tag="${1:-lpos-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
for tool in debootstrap docker; do
  command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install -y $tool (docker: docker.io)" >&2; exit 1; }
done
[[ $EUID -eq 0 ]] || { echo "debootstrap needs root" >&2; exit 1; }

root="$(mktemp -d /var/tmp/lpos-base.XXXXXX)"
chmod 755 "$root"  # apt downloads as its own user, _apt
cleanup() {
  umount "$root/proc" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT

debootstrap --variant=minbase bookworm "$root" "$mirror"

# debian:bookworm-slim's dpkg filter: no manuals, documentation (its copyright files stay) or translations
cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cat >"$root/etc/apt/apt.conf.d/docker-no-recommends" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
# and its apt settings: no downloaded packages or binary caches (80 MB) left in an image's layer
cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

mount -t proc proc "$root/proc"
chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive sh -euc '
  apt-get update -q
  apt-get upgrade -y -q
  apt-get install -y -q python3 python3-venv python-is-python3 ca-certificates
  apt-get clean
'
umount "$root/proc"

# what an image does not need: package lists and caches, logs, the files debootstrap installed
# before the filter, and the host's name and resolver (Docker gives each container its own)
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old "$root"/var/log/*
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
rm -f "$root/etc/hostname" "$root/etc/resolv.conf"

tar --numeric-owner --xattrs -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["python3"]' \
  --message "Debian bookworm minbase + python3 (deploy/base_image.sh)" - "$tag"
docker run --rm "$tag" python3 -c "import sys, ssl, venv; print('base', sys.version.split()[0], ssl.OPENSSL_VERSION)"
