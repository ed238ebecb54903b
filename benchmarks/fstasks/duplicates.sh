tools filesystem list-directory path=$F/shared | sed -n 's/^\[FILE\] //p' |
while read -r name; do
  echo "$(tools filesystem read-text-file path=$F/shared/$name | sha256sum | cut -d' ' -f1) $name"
done | sort > sums
awk '{ g[$1] = g[$1] ? g[$1] " " $2 : $2; n[$1]++ } END { for (h in g) if (n[h] > 1) print g[h] }' sums | sort > dups
tools filesystem write-file path=$F/reports/duplicates.txt content=@dups > /dev/null
