note=$(tools filesystem read-text-file path=$FILES/hunt/start.txt)
while next=$(echo "$note" | sed -n 's/^next: //p'); [ -n "$next" ]; do
  note=$(tools filesystem read-text-file path=$FILES/$next)
done
echo "$note" | grep -oE '[0-9]-[A-Z]+-[0-9]+'
