tools time get-current-time timezone=Australia/Sydney | jq -r '.datetime[:10]'
