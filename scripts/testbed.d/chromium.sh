# shellcheck shell=bash
# chromium: the browser the inspector's tests drive (chromedp), Debian's
# package, installed once; headless, so it needs no display.

chromium_up() {
	ensure_packages chromium=chromium
	CHROMIUM=$(command -v chromium)
	local version
	if ! version=$("$CHROMIUM" --version 2>/dev/null); then
		die "$CHROMIUM --version failed"
	fi
	report chromium ready "$CHROMIUM ($version)"
}
