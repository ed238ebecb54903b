tools filesystem list-directory path=$F/photos | grep -oE 'IMG_[0-9]+\.jpg$' |
while read -r name; do
  tools filesystem move-file source=$F/photos/$name destination=$F/photos/trip-${name#IMG_} > /dev/null
done
