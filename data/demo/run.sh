#!/usr/bin/env bash
# README's demo: read a real Moses n-best list with -t segmentation markers and print its (F, e, A) triples.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
moses-recaser triples --source "$here/promix.es" --trace "$here/promix.nbest-t" --nbest -o - | head -n 3
