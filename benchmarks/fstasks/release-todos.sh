tools filesystem search-files path=$F/project pattern='**/*.*' |
while read -r f; do
  tools filesystem read-text-file path="$f" | grep -qF 'TODO(release)' && echo "${f#$F/project/}"
done | sort > todos
tools filesystem write-file path=$F/reports/release-todos.txt content=@todos > /dev/null
