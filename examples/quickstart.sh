# A toolshell script: runs inside the sandboxed shell, where `tools` calls every configured tool.
# Run it with: toolshell run examples/quickstart.sh
tools --help
echo "--- text-length of three words, filtered with jq:"
for word in hello héllo 日本語; do
  n=$(tools text-metrics text-length text="$word")
  jq -n --arg w "$word" --argjson n "$n" '{word: $w, unicode_scalars: $n}' -c
done
echo "--- servers as the runtime server sees them:"
tools runtime mcp action=list | jq -r '.servers[] | "\(.name): \(.state)"'
