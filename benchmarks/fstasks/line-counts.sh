tools filesystem list-directory path=$F/logs | sed -n 's/^\[FILE\] //p' | sort |
while read -r name; do
  echo "$name $(tools filesystem read-text-file path=$F/logs/$name | wc -l)"
done > counts
tools filesystem write-file path=$F/reports/line-counts.txt content=@counts > /dev/null
