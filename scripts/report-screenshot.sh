#!/usr/bin/env bash
# Opens a cotune report in a real browser (headless Chromium from the distribution's packages)
# and keeps a screenshot:
#
#   bash scripts/report-screenshot.sh cotune-out/quickstart-report/report.html results/report-quickstart.png
#
# Checks, and exits 1 when one fails:
# - nothing is fetched from the network: the page names no URL but the SVG namespace, and
#   Chromium runs with every host unresolvable and a dead proxy, logging each failed request;
# - no console message of level warning or error (Chromium's CONSOLE log lines);
# - the rendered DOM has every plot (<svg>) and table the file has.
set -euo pipefail
html=${1:?usage: report-screenshot.sh REPORT_HTML OUT_PNG}
png=${2:?usage: report-screenshot.sh REPORT_HTML OUT_PNG}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    browser=$(command -v chromium)
fi
url="file://$(realpath "$html")"
mkdir -p "$(dirname "$png")"
log=$(mktemp)
dom=$(mktemp)
trap 'rm -f "$log" "$dom"' EXIT
offline=(--headless=new --no-sandbox --disable-gpu --hide-scrollbars
    --host-resolver-rules="MAP * ~NOTFOUND" --proxy-server=127.0.0.1:9
    --enable-logging=stderr --v=0 --log-level=0)
"$browser" "${offline[@]}" --window-size=1200,2600 --screenshot="$(realpath -m "$png")" "$url" 2>"$log" >/dev/null
"$browser" "${offline[@]}" --dump-dom "$url" 2>>"$log" >"$dom"
status=0
urls=$(grep -oE '(https?:)?//[^"'"'"' )<>]+' "$html" | grep -v '^//www.w3.org/2000/svg$\|^http://www.w3.org/2000/svg$' | sort -u || true)
if [ -n "$urls" ]; then
    echo "FAIL: the page names URLs: $urls"; status=1
fi
if grep -E 'CONSOLE|net::ERR_' "$log" | grep -v 'ERR_FILE_NOT_FOUND.*favicon' | grep -q .; then
    echo "FAIL: console messages or failed requests:"; grep -E 'CONSOLE|net::ERR_' "$log"; status=1
fi
count() { grep -o "$1" "$2" | wc -l || true; }   # grep finding none is a count of 0
want_svg=$(count '<svg' "$html")
got_svg=$(count '<svg' "$dom")
want_tables=$(count '<table' "$html")
got_tables=$(count '<table' "$dom")
if [ "$got_svg" -ne "$want_svg" ] || [ "$got_tables" -ne "$want_tables" ]; then
    echo "FAIL: rendered $got_svg of $want_svg plots and $got_tables of $want_tables tables"; status=1
fi
if [ ! -s "$png" ]; then
    echo "FAIL: no screenshot"; status=1
fi
echo "$("$browser" --version 2>/dev/null | tail -1): $got_svg plots and $got_tables tables rendered, no network, $(grep -c CONSOLE "$log" || true) console messages; screenshot $png"
exit $status
