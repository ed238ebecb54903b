related() { tools memory open-nodes names="[\"$1\"]" | jq -r --arg f "$1" --arg r "$2" '.relations[] | select(.from == $f and .relationType == $r) | .to'; }
mentor=$(related Ada mentored_by)
company=$(related "$mentor" works_at)
related "$company" headquartered_in
