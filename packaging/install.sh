#!/bin/sh
# Install this Tandem bundle for the current user, where it lies (nothing is copied but the desktop's
# files): the desktop entry, the icons and the AppStream data under ${XDG_DATA_HOME:-~/.local/share},
# and a `tandem` command (a link to this folder's) in ${TANDEM_BIN_DIR:-~/.local/bin}, unless a
# `tandem` file (pip's, say) is there already; a link from an earlier bundle is replaced.
# `./install.sh --uninstall` removes exactly those again.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
BIN=${TANDEM_BIN_DIR:-$HOME/.local/bin}
ID=io.github.tandem_desktop.Tandem
SIZES="16 22 24 32 48 64 128 256 512"

refresh() {
    # Desktops watch these folders and pick changes up by themselves. Caches that already exist are
    # brought up to date (a stale one would hide the icon); none is created, since a cache nobody
    # updates would later hide other programs' icons.
    if [ -f "$DATA/icons/hicolor/icon-theme.cache" ] && command -v gtk-update-icon-cache >/dev/null 2>&1; then
        gtk-update-icon-cache -q -t "$DATA/icons/hicolor" 2>/dev/null || true
    fi
    if [ -f "$DATA/applications/mimeinfo.cache" ] && command -v update-desktop-database >/dev/null 2>&1; then
        update-desktop-database -q "$DATA/applications" 2>/dev/null || true
    fi
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$DATA/applications/$ID.desktop" "$DATA/metainfo/$ID.metainfo.xml" \
          "$DATA/icons/hicolor/scalable/apps/$ID.svg"
    for s in $SIZES; do rm -f "$DATA/icons/hicolor/${s}x${s}/apps/$ID.png"; done
    if [ -L "$BIN/tandem" ] && [ "$(readlink "$BIN/tandem")" = "$HERE/tandem" ]; then rm -f "$BIN/tandem"; fi
    refresh
    echo "Tandem's desktop entry, icons and \`tandem\` command are removed. This folder ($HERE) and your"
    echo "chats and models (tandem doctor lists their folders) are left as they were."
    exit 0
fi
if [ $# -gt 0 ]; then echo "usage: $0 [--uninstall]" >&2; exit 2; fi

mkdir -p "$DATA/applications" "$DATA/metainfo" "$DATA/icons/hicolor/scalable/apps" "$BIN"
# The desktop entry runs this folder's executable (quoted: the path may hold spaces).
sed -e "s|^Exec=tandem|Exec=\"$HERE/tandem\"|" -e "s|^TryExec=.*|TryExec=$HERE/tandem|" \
    "$HERE/share/applications/$ID.desktop" > "$DATA/applications/$ID.desktop"
cp "$HERE/share/metainfo/$ID.metainfo.xml" "$DATA/metainfo/"
cp "$HERE/share/icons/hicolor/scalable/apps/$ID.svg" "$DATA/icons/hicolor/scalable/apps/"
for s in $SIZES; do
    mkdir -p "$DATA/icons/hicolor/${s}x${s}/apps"
    cp "$HERE/share/icons/hicolor/${s}x${s}/apps/$ID.png" "$DATA/icons/hicolor/${s}x${s}/apps/"
done
refresh
echo "Tandem is in your desktop's menu now."
if [ -e "$BIN/tandem" ] && [ ! -L "$BIN/tandem" ]; then      # a file, not a bundle's link: pip's, say
    echo "$BIN/tandem is another Tandem (from pip, say), left as it is: run this one as $HERE/tandem."
else
    ln -sfn "$HERE/tandem" "$BIN/tandem"
    case ":$PATH:" in
        *":$BIN:"*) echo "Run it from a terminal as: tandem" ;;
        *) echo "Run it from a terminal as $BIN/tandem, or add $BIN to your PATH." ;;
    esac
fi
echo "Remove it again with: $0 --uninstall"
