#!/usr/bin/env bash
# Resolves the reference Apache Kafka of the tests and benchmarks (never a dependency of partctl)
# from Maven Central with Maven: for each version (default: KAFKA_3 and KAFKA_4 of versions.env)
# the artifacts of pom.xml and their runtime dependencies, as jars in
#     ${PARTCTL_KAFKA_CACHE:-$HOME/.cache/partctl/kafka}/<version>/
# outside the work tree; Maven keeps its own repository (~/.m2 unless PARTCTL_KAFKA_MAVEN_ARGS
# says otherwise, e.g. -Dmaven.repo.local=/tmp/m2). A version is complete when its directory
# holds the marker .resolved naming this pom; a complete one is left alone, an incomplete one
# (an interrupted run) is resolved again. Prints one line per version; on a failure, Maven's
# output and a non-zero status.
#
#     bash tests/kafka/resolve.sh            # both versions
#     bash tests/kafka/resolve.sh 4.3.0      # another one, e.g. to try a 4.x before setting it
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
cache=${PARTCTL_KAFKA_CACHE:-$HOME/.cache/partctl/kafka}
read -r -a maven_args <<< "${PARTCTL_KAFKA_MAVEN_ARGS:-}"
command -v mvn >/dev/null 2>&1 || { echo "kafka: mvn not found (Debian: apt-get install maven)" >&2; exit 1; }

# the marker names the pom's content: a changed pom resolves every version again
pom_sum=$(sha256sum "$here/pom.xml" | cut -c1-16)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("$KAFKA_3" "$KAFKA_4")
mkdir -p "$cache"

for version in "${versions[@]}"; do
    dest=$cache/$version
    marker="kafka $version pom $pom_sum"
    if [ -f "$dest/.resolved" ] && [ "$(cat "$dest/.resolved")" = "$marker" ]; then
        echo "kafka: $version cached in $dest ($(ls "$dest" | wc -l) jars)"
        continue
    fi
    work=$(mktemp -d "$cache/.$version.XXXXXX")
    start=$SECONDS
    if ! mvn -B -q -Dstyle.color=never -f "$here/pom.xml" "${maven_args[@]}" \
            -Dkafka.version="$version" dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory="$work/jars" >"$work.log" 2>&1; then
        cat "$work.log" >&2
        rm -rf "$work" "$work.log"
        echo "kafka: resolving Apache Kafka $version from Maven Central FAILED (Maven's output above)" >&2
        exit 1
    fi
    echo "$marker" > "$work/jars/.resolved"
    # into place at once: a reader sees the old directory, none, or the complete new one
    rm -rf "$dest"
    mv "$work/jars" "$dest"
    rm -rf "$work" "$work.log"
    echo "kafka: $version resolved into $dest ($(ls "$dest" | wc -l) jars, $((SECONDS - start))s)"
done
