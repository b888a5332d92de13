# Sourced by the scripts that run Python tools in a virtual environment of their own
# (storage-servers.sh, reference-decoders.sh, deploy-tools.sh, demo-photos.sh): the one way
# to make one.
#
#   install_venv DIR [PACKAGE...] make DIR with the pinned PACKAGEs when it is missing or
#                                 was left half made (idempotent); installs python3-venv
#                                 with apt-get when Python cannot make one
install_venv() {
    local venv=$1
    shift
    if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then return; fi
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        local sudo=""
        if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
        echo "$(basename "$0"): installing python3-venv" >&2
        $sudo apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
    fi
    rm -rf "$venv"
    python3 -m venv "$venv"
    if (($#)); then "$venv/bin/pip" install -q --disable-pip-version-check "$@"; fi
    touch "$venv/.complete"
}
