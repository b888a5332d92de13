# Sourced by build.sh and test.sh: the container engine (podman, else docker) as
# $engine, installed with apt-get when neither is there, and podman's settings for
# machines that have none of their own (containers.conf beside this file).
apt_install() {
  local sudo=
  ((EUID == 0)) || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

install_engine() {
  if command -v podman >/dev/null; then
    engine=podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    engine=docker
  else
    apt_install podman runc uidmap slirp4netns fuse-overlayfs mmdebstrap
    engine=podman
  fi
  if [[ $engine == podman && -z ${CONTAINERS_CONF:-} && ! -e /etc/containers/containers.conf ]]; then
    export CONTAINERS_CONF="$PWD/deploy/container/containers.conf"
  fi
}
