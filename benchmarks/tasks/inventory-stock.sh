csv=$(tools filesystem search-files path=$FILES pattern='**/inventory*' | head -1)
tools filesystem read-text-file path="$csv" | awk -F, '$1 == "SKU-017" {print $3}'
