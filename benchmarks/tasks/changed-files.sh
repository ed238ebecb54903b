tools git git-log repo_path=$REPO max_count=5 | sed -n 's/^Commit: //p' | while read -r commit; do
  echo "${commit:0:7} $(tools git git-show repo_path=$REPO revision=$commit | sed -n 's|^+++ b/||p' | sort | paste -sd' ')"
done
