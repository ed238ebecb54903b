tools filesystem read-text-file path=$FILES/config.json | jq .port
