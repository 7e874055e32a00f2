#!/usr/bin/env bash
# README's demo, on data shipped in data/ (TICO-19 fr-en, CC0; a real Moses n-best list):
#  1. read a Moses n-best list with -t markers into (F, e, A) triples;
#  2. train a bilingual recaser on 1,800 TICO-19 sentence pairs (weights on the next 150);
#  3. recase the last 150 lowercased English lines, with and without the French source, and score them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${DEMO_DIR:-$here/../../runs/demo}
mkdir -p "$work"
cd "$work"

echo "== 1. a Moses n-best list with -t segmentation, as triples (first hypothesis)"
moses-recaser triples --source "$here/promix.es" --trace "$here/promix.nbest-t" --nbest -o triples.jsonl
head -n 1 triples.jsonl

echo "== 2. tokenize TICO-19 fr-en, split 1800 train / 150 dev / 150 test, train"
for l in fr en; do
  moses-recaser tokenize -l $l -i "$here/../tico19/tico19-test.$l" -o all.$l
  sed -n '1,1800p' all.$l > train.$l
  sed -n '1801,1950p' all.$l > dev.$l
  sed -n '1951,2100p' all.$l > test.$l
done
python3 -c "import sys; sys.stdout.write(open('test.en', encoding='utf-8').read().lower())" > test.lc.en
moses-recaser -q train --source train.fr --target train.en --dev-source dev.fr --dev-target dev.en -o model

echo "== 3. recase the lowercased test set"
moses-recaser -q recase --model model --source test.fr --input test.lc.en --align -o test.bilingual.en
moses-recaser -q recase --model model --input test.lc.en -o test.monolingual.en
echo "lowercase input:         $(moses-recaser eval --hyp test.lc.en --ref test.en)"
echo "monolingual (no source): $(moses-recaser eval --hyp test.monolingual.en --ref test.en)"
echo "bilingual (with source): $(moses-recaser eval --hyp test.bilingual.en --ref test.en)"
head -n 3 test.bilingual.en
