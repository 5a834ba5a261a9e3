# The lecture hall's HAProxy and Redis (deploy/compose.yaml): one Debian bookworm package on the app's
# own base, so no other image is pulled (lpos-base:bookworm from deploy/base_image.sh shares its layer
# with the app image).
#   docker build -f deploy/service.Dockerfile --build-arg PACKAGE=haproxy -t lpos-haproxy deploy
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
ARG PACKAGE
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${PACKAGE:?name a Debian package} \
 && rm -rf /var/lib/apt/lists/*
