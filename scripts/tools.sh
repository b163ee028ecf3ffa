#!/usr/bin/env bash
# Installs the cargo subcommands CI uses, each at a pinned version, when it is
# missing or at another version. A fresh machine builds them from crates.io.
#
#   scripts/tools.sh
#
# cargo-deny runs `cargo deny check bans licenses sources` against deny.toml.
# Built from source it takes about 4 minutes on two cores.
set -euo pipefail

CARGO_DENY_VERSION=0.20.2

if [ "$(cargo deny --version 2>/dev/null || true)" != "cargo-deny $CARGO_DENY_VERSION" ]; then
    echo "installing cargo-deny $CARGO_DENY_VERSION"
    cargo install cargo-deny --version "$CARGO_DENY_VERSION" --locked
fi
