#!/usr/bin/env bash
# Fetches the jars of a named Apache ZooKeeper server version (or, with --curator, of a named
# Apache Curator version) once, caches them under target/zk-versions/, and prints the Java
# class path on stdout. The harness then runs against them with
# ZKGUARD_ZOOKEEPER_VERSION=VERSION (or ZKGUARD_CURATOR_VERSION=VERSION): see docs/testing.md.
#
#   scripts/zk-version.sh 3.9.3             # ZooKeeper 3.9.3's server
#   scripts/zk-version.sh --curator 5.7.1   # Curator 5.7.1 with ZooKeeper 3.9.3's client
#   scripts/zk-version.sh --list            # the versions it can fetch
#   scripts/zk-version.sh --check 3.9.3     # the class path if cached, else fail (no fetch)
#
# The jars come from PyPI's `pyspark` source distributions, which carry Apache's jars
# unchanged (pip download once per release, kept in the cache's .archives/; only the named
# jars are extracted).
# A version not in the table below fails with the list of those it can have: never a skip.
# ZKGUARD_VERSIONS_DIR moves the cache (default: target/zk-versions in this repository).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cache="${ZKGUARD_VERSIONS_DIR:-$repo/target/zk-versions}"

# product version -> pyspark release that ships it, and (for Curator) the ZooKeeper client
# version beside it in that release.
zookeeper_source() {
    case "$1" in
    3.6.3) echo 3.5.3 ;;
    3.9.3) echo 4.0.1 ;;
    3.9.4) echo 4.1.1 ;;
    3.9.5) echo 4.3.0 ;;
    *) return 1 ;;
    esac
}
curator_source() {
    case "$1" in
    5.7.1) echo "4.0.1 3.9.3" ;;
    5.9.0) echo "4.3.0 3.9.5" ;;
    *) return 1 ;;
    esac
}
LIST="ZooKeeper 3.6.3 (pyspark 3.5.3), 3.9.3 (pyspark 4.0.1), 3.9.4 (pyspark 4.1.1), 3.9.5 (pyspark 4.3.0); Curator 5.7.1 (pyspark 4.0.1), 5.9.0 (pyspark 4.3.0)"

die() {
    echo "zk-version.sh: $*" >&2
    exit 1
}

# The class path of a cached directory: conf/ (the logging configuration) then lib/*.jar.
classpath() {
    local dir="$1" cp="$1/conf" jar
    for jar in "$dir"/lib/*.jar; do cp="$cp:$jar"; done
    echo "$cp"
}

# Server jars: ZooKeeper's own, what its server needs at run time (metrics, commons-io,
# snappy, Jackson for the AdminServer's JSON), and common_jars. Jetty, which the AdminServer
# also needs, is not in pyspark (Spark shades its own): the harness adds Debian's.
server_jars() { # $1: ZooKeeper version
    cat <<LIST
zookeeper-$1.jar
zookeeper-jute-$1.jar
audience-annotations-*.jar
commons-io-*.jar
metrics-core-*.jar
snappy-java-*.jar
jackson-annotations-2*.jar
jackson-core-2*.jar
jackson-databind-2*.jar
LIST
    common_jars
}
# What the server and a client both need: Netty (ZooKeeper 3.9's client loads its SSL
# classes even for a plain connection) and SLF4J 2 with Log4j 2 behind it. A pattern
# behind `?` is taken where the release has it: Netty 4.2 (pyspark 4.3.0, ZooKeeper 3.9.5)
# moved the codec's base classes into netty-codec-base.
common_jars() {
    cat <<LIST
netty-buffer-*.jar
netty-codec-4*.jar
?netty-codec-base-4*.jar
netty-common-*.jar
netty-handler-4*.jar
netty-resolver-4*.jar
netty-transport-4*.jar
netty-transport-classes-epoll-*.jar
netty-transport-native-unix-common-*.jar
netty-transport-native-epoll-*-linux-$(uname -m | sed 's/aarch64/aarch_64/').jar
slf4j-api-*.jar
log4j-api-*.jar
log4j-core-*.jar
log4j-slf4j2-impl-*.jar
LIST
}
curator_jars() { # $1: Curator version, $2: ZooKeeper client version
    cat <<LIST
curator-client-$1.jar
curator-framework-$1.jar
curator-recipes-$1.jar
guava-*.jar
failureaccess-*.jar
zookeeper-$2.jar
zookeeper-jute-$2.jar
LIST
    common_jars
}

# Log4j 2's configuration: to stderr (as Debian's slf4j-simple; a Java peer's stdout is its
# protocol), the server at INFO (the harness keeps it per server), Curator only its errors.
log_config() { # $1: level
    cat <<CONF
status = error
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_ERR
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{HH:mm:ss.SSS} [%t] %-5level %c - %msg%n
rootLogger.level = $1
rootLogger.appenderRef.out.ref = out
CONF
}

# Extracts the jars named by the patterns on stdin from pyspark $1's archive into $2/lib.
extract() { # $1: pyspark version, $2: destination directory, $3: log level
    local pyspark="$1" dest="$2" level="$3" tmp archive members pattern found
    tmp="$(mktemp -d "$cache/.fetch-XXXXXX")"
    trap 'rm -rf "$tmp"' RETURN
    archive="$cache/.archives/pyspark-$pyspark.tar.gz"
    if [ ! -f "$archive" ]; then
        mkdir -p "$cache/.archives"
        echo "zk-version.sh: downloading pyspark $pyspark (several hundred MB, once)" >&2
        pip download --quiet --no-deps "pyspark==$pyspark" -d "$tmp/dl" >&2 ||
            die "cannot download pyspark $pyspark with pip (it carries the jars)"
        mv "$tmp"/dl/pyspark-"$pyspark".tar.gz "$archive" ||
            die "pip gave no pyspark-$pyspark.tar.gz"
    fi
    members="$(tar tzf "$archive" | grep '/deps/jars/.*\.jar$')" ||
        die "$archive holds no deps/jars/*.jar"
    mkdir -p "$tmp/out/lib" "$tmp/out/conf"
    while read -r pattern; do
        optional=false
        case "$pattern" in \?*) optional=true pattern="${pattern#\?}" ;; esac
        found="$(printf '%s\n' "$members" | while read -r m; do
            # shellcheck disable=SC2254
            case "${m##*/}" in $pattern) echo "$m" ;; esac
        done)"
        if [ -z "$found" ]; then
            $optional && continue
            die "pyspark $pyspark has no jar matching $pattern"
        fi
        printf '%s\n' "$found" >>"$tmp/wanted"
    done
    tar xzf "$archive" --no-same-owner -C "$tmp" --files-from="$tmp/wanted"
    while read -r m; do mv "$tmp/$m" "$tmp/out/lib/"; done <"$tmp/wanted"
    log_config "$level" >"$tmp/out/conf/log4j2.properties"
    rm -rf "$dest"
    mkdir -p "$(dirname "$dest")"
    mv "$tmp/out" "$dest"
}

check=false
kind=zookeeper
while [ $# -gt 0 ]; do
    case "$1" in
    --curator) kind=curator ;;
    --check) check=true ;;
    --list)
        echo "$LIST"
        exit 0
        ;;
    -h | --help)
        sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
    shift
done
[ $# -eq 1 ] || die "give one version (see --help); it can fetch: $LIST"
version="$1"

if [ "$kind" = zookeeper ]; then
    pyspark="$(zookeeper_source "$version")" ||
        die "no source for ZooKeeper $version; it can fetch: $LIST"
    dest="$cache/zookeeper-$version"
    marker="zookeeper-$version.jar"
else
    source="$(curator_source "$version")" ||
        die "no source for Curator $version; it can fetch: $LIST"
    read -r pyspark zk <<<"$source"
    dest="$cache/curator-$version"
    marker="curator-recipes-$version.jar"
fi

if [ ! -f "$dest/lib/$marker" ]; then
    $check && die "$kind $version is not cached in $dest: run scripts/zk-version.sh $([ "$kind" = curator ] && echo '--curator ')$version"
    mkdir -p "$cache"
    if [ "$kind" = zookeeper ]; then
        server_jars "$version" | extract "$pyspark" "$dest" info
    else
        curator_jars "$version" "$zk" | extract "$pyspark" "$dest" error
    fi
fi
classpath "$dest"
