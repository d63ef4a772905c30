#!/usr/bin/env bash
# Clones every repository named by a label file (@repo, @commit, @checkout) into DIR at the pinned
# commit, so that `PORTKIT_REALCODE_DIR=DIR ctest -R realcode_corpora` (or score.py --corpora DIR)
# can score it. Needs network and git; about 150 MB in all. Existing checkouts are left alone.
#   bench/real_code/checkout.sh DIR
set -euo pipefail
dir=${1:?usage: $0 DIR}
labels=$(dirname "$0")/labels
mkdir -p "$dir"
for f in "$labels"/*.tsv; do
  repo=$(awk -F'\t' '$1=="@repo"{print $2}' "$f")
  commit=$(awk -F'\t' '$1=="@commit"{print $2}' "$f")
  name=$(awk -F'\t' '$1=="@checkout"{print $2}' "$f")
  if [ -d "$dir/$name" ]; then
    echo "$name: present"
    continue
  fi
  git clone --quiet --filter=blob:none "https://github.com/$repo.git" "$dir/$name"
  git -C "$dir/$name" -c advice.detachedHead=false checkout --quiet "$commit"
  echo "$name: $repo at $commit"
done
