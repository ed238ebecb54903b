name=$(tools filesystem list-directory-with-sizes path=$F/media sortBy=size | sed -n 's/^\[FILE\] \([^ ]*\).*/\1/p' | head -n 1)
echo "$name $(tools filesystem get-file-info path=$F/media/$name | sed -n 's/^size: //p')"
