#!/usr/bin/env bash
# Renders Switchyard's book (docs/) into docs/book/ with mdBook, installing the pinned mdBook
# under ~/.cache/switchyard/tools when missing. Fails on any error or warning mdBook reports
# (a chapter or an included file that is missing); links are checked by the `docs` test.
set -euo pipefail
cd "$(dirname "$0")/.."

version=0.5.4
tools="$HOME/.cache/switchyard/tools"
mdbook="$tools/bin/mdbook"

if [ ! -x "$mdbook" ] || [ "$("$mdbook" --version)" != "mdbook v$version" ]; then
  echo "== cargo install mdbook $version"
  # Only what `mdbook build` needs: the search index, not the file watcher or the web server.
  # The build goes to a temporary directory, not the project's target directory.
  env -u CARGO_TARGET_DIR cargo install mdbook --version "$version" --locked \
    --no-default-features --features search --root "$tools"
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# mdBook reports a missing include as an ERROR line yet exits 0: its log decides too.
if ! NO_COLOR=1 "$mdbook" build docs >"$log" 2>&1; then
  cat "$log"
  echo "mdbook build docs failed" >&2
  exit 1
fi
if grep -Eq '(^|[[:space:]])(ERROR|WARN)[[:space:]]' "$log"; then
  cat "$log"
  echo "mdbook build docs reported problems" >&2
  exit 1
fi
echo "book written to docs/book/ ($(find docs/book -name '*.html' | wc -l) pages)"
