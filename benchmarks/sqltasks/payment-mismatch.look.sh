set -eo pipefail
schema() { tools postgres pg-manage-schema operation=get_info tableName="$1" |
  jq -r '.[-1].text | fromjson | "\(.tableName): \([.columns[] | "\(.name) \(.dataType)"] | join(", "))"'; }
for t in payments orders; do schema $t; done
