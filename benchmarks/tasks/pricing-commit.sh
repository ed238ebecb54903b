commit=$(tools git git-log repo_path=$REPO max_count=50 | awk '/^Commit:/ {c = $2} /^Message: Add pricing table$/ {print c}')
echo "${commit:0:7} $(tools git git-show repo_path=$REPO revision=$commit | grep -o 'base_price = [0-9]*')"
