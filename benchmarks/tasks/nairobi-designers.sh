tools memory read-graph | jq -r '
  [.relations[] | select(.relationType == "lives_in" and .to == "Nairobi") | .from] as $there
  | .entities[] | select(.observations | index("works as designer")) | .name as $n
  | select($there | index($n)) | $n'
