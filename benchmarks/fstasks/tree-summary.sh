tools filesystem directory-tree path=$F/project |
  jq -r '.[] | select(.type == "directory") | "\(.name) \([.. | objects | select(.type == "file")] | length)"' |
  sort > tree
tools filesystem write-file path=$F/reports/tree.txt content=@tree > /dev/null
