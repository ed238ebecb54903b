tools filesystem list-directory path=$F/inbox | sed -n 's/^\[FILE\] //p' > names
for ext in $(sed 's/.*\.//' names | sort -u); do
  tools filesystem create-directory path=$F/inbox/$ext > /dev/null
done
while read -r name; do
  tools filesystem move-file source=$F/inbox/$name destination=$F/inbox/${name##*.}/$name > /dev/null
done < names
