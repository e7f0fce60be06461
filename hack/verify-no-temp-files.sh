#!/usr/bin/env bash
# Fails, listing them, when git tracks files that look like editor or tool
# leftovers: *.tmp (which covers the .NAME.HASH.tmp files of atomic
# writers), backups (*~, *.orig), rejected patch hunks (*.rej), vim swap
# files (*.swp, *.swo), and emacs lock and autosave files (.#NAME, #NAME#).
# .gitignore keeps new ones out of `git add`; this catches the ones added
# anyway (git add -f, or before the pattern was ignored).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

found=()
while IFS= read -r -d '' path; do
	case "${path##*/}" in
	*.tmp | *~ | *.orig | *.rej | *.swp | *.swo | .\#* | \#*\#)
		found+=("${path}")
		;;
	esac
done < <(git ls-files -z)

if ((${#found[@]} > 0)); then
	echo "git tracks files that look like editor or tool temporaries; remove them (git rm):" >&2
	printf '  %s\n' "${found[@]}" >&2
	exit 1
fi
